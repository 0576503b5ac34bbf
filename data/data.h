// Everything in data/ in one include: datasets, the DataLoader, image
// transforms, IDX files and the hashes that seed them.
#pragma once
#include "data/dataset.h"
#include "data/hash.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data/transforms.h"
