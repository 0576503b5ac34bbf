// Everything in nn/ in one include.
#pragma once
#include "nn/attention.h"
#include "nn/containers.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/feed_forward.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/positional_encoding.h"
#include "nn/rnn.h"
#include "nn/sampling.h"
