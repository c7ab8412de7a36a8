// expect-error: 3:3: tensor.collapse_shape: dims [0, 1] of the expanded type multiply to 6, not 7
func.func @f(%a: tensor<2x3xf32>) -> tensor<7xf32> {
  %r = tensor.collapse_shape %a [[0, 1]] : tensor<2x3xf32> into tensor<7xf32>
  return %r : tensor<7xf32>
}
