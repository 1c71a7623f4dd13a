# tserve: `make demo` serves a prediction, `make test` runs every test. Each target installs
# what is missing (apt packages, the .venv, the frontend jar) and is quiet when nothing is to do.

SHELL := /bin/bash
PY := .venv/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
GRADLE := gradle --no-daemon -q
# Debian's gradle script prints the JVM banner on every call: keep it out of the output.
JVM_BANNER := '^(openjdk version|OpenJDK Runtime|OpenJDK 64-Bit|WARNING: (A terminally deprecated|System::setSecurityManager|Please consider reporting this to the maintainers of org.gradle))'
JAR := ts/frontend/tserve-frontend.jar
# Java 17 and Debian's Gradle 4.4.1 build the frontend; every Java library and protoc come from Maven Central.
APT_PACKAGES := openjdk-17-jdk-headless gradle etcd-server
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
FRONTEND_SOURCES := $(shell find frontend/src -type f 2>/dev/null) build.gradle settings.gradle gradle.properties

.PHONY: install apt venv jar demo test test-java test-python bench lint clean

install: apt venv jar .venv/.installed .venv/.large

apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing apt packages: $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

venv: .venv/.torch

.venv/.torch:
	@test -x $(PY) || python3 -m venv .venv
	@$(PY) -c "import torch" 2>/dev/null || { echo "Installing torch==2.13.0 (CPU wheel)"; $(PIP) install torch==2.13.0; }
	@touch $@

jar: $(JAR)

$(JAR): $(FRONTEND_SOURCES) | apt
	@echo "Building the frontend jar"
	@$(GRADLE) packageJar 2>&1 | grep -vE $(JVM_BANNER); exit $${PIPESTATUS[0]}

.venv/.installed: pyproject.toml setup.py constraints.txt .venv/.torch $(JAR)
	@echo "Installing tserve into .venv (pip install -e .[dev])"
	@TSERVE_SKIP_JAVA_BUILD=1 $(PIP) install -c constraints.txt -e '.[dev]'
	@touch $@

# Libraries of the distributed base handlers; DeepSpeed builds against the installed torch.
.venv/.large: .venv/.installed
	@echo "Installing the large-model libraries (transformers, accelerate, deepspeed)"
	@TSERVE_SKIP_JAVA_BUILD=1 $(PIP) install -c constraints.txt -e '.[large]'
	@$(PY) -c "import deepspeed" 2>/dev/null || DS_BUILD_OPS=0 $(PIP) install --no-build-isolation -c constraints.txt deepspeed==0.19.8
	@touch $@

# The demo needs neither DeepSpeed nor the other large-model libraries (make install adds them).
demo: apt venv jar .venv/.installed
	@bash examples/image_classifier/demo.sh

test: install test-java test-python

test-java:
	@echo "== Java tests"
	@$(GRADLE) test javaCoverage 2>&1 | grep -vE $(JVM_BANNER); exit $${PIPESTATUS[0]}

test-python:
	@echo "== Python tests"
	@rm -f .coverage .coverage.*
	@HF_HUB_OFFLINE=1 $(PY) -m pytest --cov --cov-report=term:skip-covered -q

bench: install
	@bash benchmarks/run.sh

# ruff over the Python, then javac -Xlint:all -Werror over the frontend's hand-written Java (main and test).
lint: install
	@.venv/bin/ruff check ts model-archiver test examples benchmarks conftest.py
	@$(GRADLE) lintJava 2>&1 | grep -vE $(JVM_BANNER); exit $${PIPESTATUS[0]}

clean:
	rm -rf build frontend/build $(JAR) .pytest_cache .hypothesis .coverage .coverage.*
