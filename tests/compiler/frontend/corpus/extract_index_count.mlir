// expect-error: 4:3: tensor.extract: 1 indices for a rank-2 tensor
func.func @f(%a: tensor<3x3xf32>) -> f32 {
  %c = arith.constant 0 : index
  %r = tensor.extract %a[%c] : tensor<3x3xf32>
  return %r : f32
}
