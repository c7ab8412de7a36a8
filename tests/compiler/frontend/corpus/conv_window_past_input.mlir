// expect-error: 3:3: linalg.conv_2d_nhwc_hwcf: operand #0 dim 1 is 4 but its indexing map reaches index 4
func.func @f(%a: tensor<1x4x4x1xf32>, %w: tensor<3x3x1x1xf32>, %o: tensor<1x3x3x1xf32>) -> tensor<1x3x3x1xf32> {
  %r = linalg.conv_2d_nhwc_hwcf ins(%a, %w : tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>) outs(%o : tensor<1x3x3x1xf32>) -> tensor<1x3x3x1xf32>
  return %r : tensor<1x3x3x1xf32>
}
