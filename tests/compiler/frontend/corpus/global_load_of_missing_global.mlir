// expect-error: 3:3: 'util.global.load' names @nothere, which is not a util.global of this module
func.func @f() -> tensor<f32> {
  %r = util.global.load @nothere : tensor<f32>
  return %r : tensor<f32>
}
