// expect-error: 3:3: linalg.fill: operand #0 must be a scalar, not tensor<4xf32>
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.fill ins(%a : tensor<4xf32>) outs(%a : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
