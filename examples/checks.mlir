// Test functions for `irtk check` (docs/check.md): each computes something and compares it with
// the expected value through check.* ops, as IREE's e2e tests do.
func.func @softmax_rows_sum_to_one() {
  %x = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [-1.0, 0.0, 0.5, 8.0]]> : tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %s = linalg.softmax dimension(1) ins(%x : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %init = tensor.empty() : tensor<2xf32>
  %zero = arith.constant 0.0 : f32
  %z = linalg.fill ins(%zero : f32) outs(%init : tensor<2xf32>) -> tensor<2xf32>
  %sum = linalg.reduce ins(%s : tensor<2x4xf32>) outs(%z : tensor<2xf32>) dimensions = [1]
    (%a: f32, %acc: f32) {
      %t = arith.addf %a, %acc : f32
      linalg.yield %t : f32
    }
  check.expect_almost_eq_const(%sum, dense<1.0> : tensor<2xf32>) : tensor<2xf32>
  return
}

func.func @matmul_by_identity() {
  %a = arith.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>
  %i = arith.constant dense<[[1, 0], [0, 1]]> : tensor<2x2xi32>
  %e = tensor.empty() : tensor<2x2xi32>
  %zero = arith.constant 0 : i32
  %z = linalg.fill ins(%zero : i32) outs(%e : tensor<2x2xi32>) -> tensor<2x2xi32>
  %p = linalg.matmul ins(%a, %i : tensor<2x2xi32>, tensor<2x2xi32>) outs(%z : tensor<2x2xi32>) -> tensor<2x2xi32>
  check.expect_eq(%p, %a) : tensor<2x2xi32>
  return
}
