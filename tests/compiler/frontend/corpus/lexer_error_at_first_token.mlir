// expect-error: 2:1: identifier expected to start with
@
func.func @f() {
  return
}
