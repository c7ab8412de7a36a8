// expect-error: 3:3: linalg.matmul: loop d2 has extent 3 (operand #0 dim 1) but operand #1 dim 0 is 5
func.func @f(%a: tensor<4x3xf32>, %b: tensor<5x6xf32>, %c: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<4x3xf32>, tensor<5x6xf32>) outs(%c : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}
