# Two commands: `make run` (the main job) and `make test` (every test on every backend).
# Both first run scripts/bootstrap.sh, which creates .venv and installs requirements/ci.txt on first use.
#   make run RUN_ARGS="--steps 200"             extra arguments for the main job (keras-vit finetune)
#   make test PYTEST_ARGS="-k preprocessing"    extra arguments for pytest (BACKENDS="jax" picks backends)
#   make run KERAS_VIT_VERBOSE=1                 show the framework logs (TensorFlow, absl, XLA) keras-vit hides
#   make test KERAS=nightly                      the suite against keras-nightly, in the side venv .venv-nightly

RUN_ARGS ?=
PYTEST_ARGS ?=
export KERAS_VIT_VERBOSE ?=
export KERAS ?=

.PHONY: run test bootstrap clean

bootstrap:
	@bash scripts/bootstrap.sh

run: bootstrap
	.venv/bin/keras-vit finetune $(RUN_ARGS)

test: bootstrap
	@bash scripts/test.sh $(PYTEST_ARGS)

clean:
	rm -rf .venv build *.egg-info .pytest_cache
