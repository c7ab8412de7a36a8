// expect-error: 3:3: linalg.matmul takes 2 input(s) and 1 output(s), not 1 and 1
func.func @f(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = linalg.matmul ins(%a : tensor<4x4xf32>) outs(%a : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
