// Everything in optim/ in one include.
#pragma once
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
