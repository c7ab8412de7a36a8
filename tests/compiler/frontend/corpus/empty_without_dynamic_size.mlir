// expect-error: 3:3: tensor.empty: 0 dynamic size(s) for the 1 dynamic dim(s)
func.func @f(%n: index) -> tensor<?x4xf32> {
  %r = tensor.empty() : tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
