amp = { half = {"matmul"} }
