// expect-error: 3:36: dense constant of 4398046511104 elements is larger than
func.func @f() -> tensor<4294967296x1024xf32> {
  %a = arith.constant dense<1.0> : tensor<4294967296x1024xf32>
  return %a : tensor<4294967296x1024xf32>
}
