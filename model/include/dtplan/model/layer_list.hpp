// Models given as a list of layers (our JSON format): shape inference, exact parameter
// counts, and what each layer keeps for the backward pass, per sample.
//
//   {"schema_version": 1, "name": "mnist-convnet", "input_shape": [1, 28, 28],
//    "layers": [{"type": "Conv2d", "in_channels": 1, "out_channels": 16, "kernel_size": 5,
//                "padding": 2}, {"type": "ReLU"}, ...]}
//
// Shapes exclude the batch dimension. Flatten's start_dim/end_dim count the batch dimension,
// as in PyTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtplan {

class ObjectReader;

using Shape = std::vector<std::int64_t>;

std::int64_t element_count(const Shape& shape);
std::string format_shape(const Shape& shape);  // "[16, 28, 28]"

// One analysed layer. Tensors are numbered: 0 is the model input, i+1 the output of layer i.
struct LayerInfo {
  std::string type;   // "Conv2d"
  std::string label;  // "Conv2d 1->16 k5x5 s1 p2" or the layer's "name"
  Shape input_shape;
  Shape output_shape;
  std::int64_t params = 0;
  std::int64_t buffer_elements = 0;   // non-trainable state (BatchNorm running statistics)
  std::int64_t gemm_k = 0;            // Conv2d and Linear as GEMMs: the inner dimension
  bool saves_input = false;           // autograd keeps the input tensor for backward
  bool saves_output = false;          // ... or the output tensor
  bool output_aliases_input = false;  // a view or an in-place op: no new storage
  // Extra saved bytes per sample in a fixed dtype (pooling indices, dropout masks, norm stats).
  std::int64_t extra_saved_bytes_per_sample = 0;
};

struct LayerListModel {
  std::string name;
  Shape input_shape;
  bool integer_input = false;  // the first layer is an Embedding: input holds int64 indices
  std::vector<LayerInfo> layers;

  std::int64_t params() const;
  const Shape& output_shape() const;
};

// Parses and analyses {"input_shape": [...], "layers": [...]} from `reader`, checking each
// layer's keys and that shapes chain. Errors name the layer index and key.
LayerListModel layer_list_from_json(const ObjectReader& reader, const std::string& name);

std::vector<std::string> supported_layer_types();

}  // namespace dtplan
