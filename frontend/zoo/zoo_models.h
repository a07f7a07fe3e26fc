/// \file One builder function per zoo model (each in its own file), listed by zoo.cc.
#pragma once
#include "frontend/zoo/zoo.h"

namespace kiln {

ModelBuilder build_tiny_cnn(const ZooOptions& o);
ModelBuilder build_resnet18(const ZooOptions& o);
ModelBuilder build_resnet50(const ZooOptions& o);
ModelBuilder build_resnext50(const ZooOptions& o);
ModelBuilder build_inception_v3(const ZooOptions& o);
ModelBuilder build_nasnet_mobile(const ZooOptions& o);
ModelBuilder build_repvgg_a0(const ZooOptions& o);
ModelBuilder build_mobileone_s0(const ZooOptions& o);
ModelBuilder build_resnet3d18(const ZooOptions& o);
ModelBuilder build_mobilenet_v2(const ZooOptions& o);
ModelBuilder build_matmul(const ZooOptions& o);
ModelBuilder build_qmatmul(const ZooOptions& o);
ModelBuilder build_dqmatmul(const ZooOptions& o);
ModelBuilder build_requantize_edges(const ZooOptions& o);
ModelBuilder build_batch_matmul(const ZooOptions& o);
ModelBuilder build_conv2d(const ZooOptions& o);
ModelBuilder build_depthwise(const ZooOptions& o);
ModelBuilder build_conv_transpose2d(const ZooOptions& o);
ModelBuilder build_maxpool2d(const ZooOptions& o);
ModelBuilder build_dcgan(const ZooOptions& o);
ModelBuilder build_bert_base(const ZooOptions& o);
ModelBuilder build_blocked_edges(const ZooOptions& o);
ModelBuilder build_lstm_kws(const ZooOptions& o);
ModelBuilder build_ds_cnn_int8(const ZooOptions& o);
ModelBuilder build_ds_cnn_qdq(const ZooOptions& o);
ModelBuilder build_gru_refine(const ZooOptions& o);
ModelBuilder build_detector_nms(const ZooOptions& o);

}  // namespace kiln
