#include "nn/loss.h"

namespace xg::nn {

MultiLabelSoftMarginLoss::MultiLabelSoftMarginLoss(MultilabelSoftMarginLossOptions o)
    : PairLoss("MultiLabelSoftMarginLoss", std::move(o)) {}

TripletMarginWithDistanceLoss::TripletMarginWithDistanceLoss(TripletMarginWithDistanceLossOptions o)
    : TripleLoss("TripletMarginWithDistanceLoss", std::move(o)) {}

}  // namespace xg::nn
