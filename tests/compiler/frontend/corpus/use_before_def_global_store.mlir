// expect-error: 6:3: 'util.global.store' operand #0 is used before it is defined
util.global private mutable @counter = dense<2.0> : tensor<f32>
func.func @get() -> tensor<f32> {
  %0 = util.global.load @counter : tensor<f32>
  %c = arith.constant dense<1.0> : tensor<f32>
  util.global.store %1, @counter : tensor<f32>
  %1 = arith.addf %0, %c : tensor<f32>
  return %1 : tensor<f32>
}
