print("auth-server: not built yet")
