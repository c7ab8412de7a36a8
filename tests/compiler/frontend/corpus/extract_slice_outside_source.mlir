// expect-error: 3:3: tensor.extract_slice: dim 0 of the slice (offset 2, size 3, stride 1) is outside the tensor's 4
func.func @f(%a: tensor<4xf32>) -> tensor<3xf32> {
  %r = tensor.extract_slice %a[2] [3] [1] : tensor<4xf32> to tensor<3xf32>
  return %r : tensor<3xf32>
}
