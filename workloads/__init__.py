"""The MNIST workloads nvmeter measures (shipped as ``nvmeter.workloads``)."""
