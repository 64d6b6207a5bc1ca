return { value = "fresh" }
