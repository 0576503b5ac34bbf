// Everything in autograd/ in one include.
#pragma once
#include "autograd/autocast.h"
#include "autograd/autograd.h"
#include "autograd/functional.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/parallel.h"
#include "autograd/serialize.h"
#include "autograd/tensor.h"
