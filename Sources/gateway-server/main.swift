import KindredGateway

print("gateway-server: not built yet")
