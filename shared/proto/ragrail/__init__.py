"""Protobuf packages of the contract."""
