// expect-error: 4:3: tensor.pad: dim 0 is 3 + 1 + 1 = 5, but the result has 9
func.func @f(%a: tensor<3xf32>) -> tensor<9xf32> {
  %z = arith.constant 0.0 : f32
  %r = tensor.pad %a low[1] high[1] {
  ^bb0(%i: index):
    tensor.yield %z : f32
  } : tensor<3xf32> to tensor<9xf32>
  return %r : tensor<9xf32>
}
