amp = { low = {"matmul", "conv3x3"} }
