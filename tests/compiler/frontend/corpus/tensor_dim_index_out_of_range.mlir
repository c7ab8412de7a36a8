// expect-error: 5:3: tensor.dim: index 64 is out of range for a rank-3 tensor
func.func @f(%input: tensor<?x?x?xf32>) -> index {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %d = tensor.dim %input, %c64 : tensor<?x?x?xf32>
  return %d : index
}
