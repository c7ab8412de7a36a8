// expect-error: 3:3: linalg.matmul: operand #1 has rank 1 but 2 was expected
func.func @f(%a: tensor<4x4xf32>, %b: tensor<4xf32>) -> tensor<4x4xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4xf32>) outs(%a : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
