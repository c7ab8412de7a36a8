// expect-error: 2:1: ellipsis
.func @f() {
  return
}
