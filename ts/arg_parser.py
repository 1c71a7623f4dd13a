"""TorchServe's ``ts.arg_parser``: the parsers of the ``torchserve`` command and of the backend
worker, under TorchServe 0.12's names (``ArgParser.ts_parser()``, ``model_service_worker_args()``,
``extract_args()``), for scripts that build or inspect those command lines."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


class ArgParser:
    @staticmethod
    def ts_parser() -> argparse.ArgumentParser:
        """The ``torchserve`` command line (the launcher, ``ts.model_server``, parses with it)."""
        parser = argparse.ArgumentParser(prog="torchserve", description="tserve: a TorchServe-compatible model server")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("-v", "--version", action="store_true", help="print the version and exit")
        action.add_argument("--start", action="store_true", help="start the model server (the default action)")
        action.add_argument("--stop", action="store_true", help="stop the running model server and its workers")
        parser.add_argument("--ts-config", dest="ts_config", help="configuration file (config.properties)")
        parser.add_argument("--model-store", dest="model_store", help="directory holding model archives")
        parser.add_argument("--workflow-store", dest="workflow_store", help="folder of workflow archives (.war); default: model store")
        parser.add_argument("--models", nargs="+", help="models to load at startup: NAME=ARCHIVE, ARCHIVE or 'all'")
        parser.add_argument("--log-config", dest="log_config", help="log4j2 config file (TorchServe's logger names)")
        parser.add_argument("--cpp-log-config", dest="cpp_log_config", help=argparse.SUPPRESS)
        parser.add_argument("--foreground", action="store_true", help="stay attached to the server until it exits")
        parser.add_argument("--no-config-snapshots", "--ncs", dest="ncs", action="store_true", help="do not write config snapshots")
        parser.add_argument("--plugins-path", "--ppath", dest="plugins_path", help=argparse.SUPPRESS)
        parser.add_argument("--disable-token-auth", "--dt", dest="disable_token_auth", action="store_true",
                            help="turn off token authorization")
        parser.add_argument("--enable-model-api", dest="enable_model_api", action="store_true", help="allow (un)registering models")
        parser.add_argument("--member-of", dest="member_of", metavar="LEADER",
                            help="run as a member node of LEADER (its management address) for models across machines")
        return parser

    @staticmethod
    def model_service_worker_args() -> argparse.ArgumentParser:
        """The backend worker's command line (``python -m ts.model_service_worker``)."""
        parser = argparse.ArgumentParser(prog="ts.model_service_worker", description="tserve backend worker")
        parser.add_argument("--sock-type", choices=["unix", "tcp"], default="unix")
        parser.add_argument("--sock-name", help="Unix socket path, e.g. /tmp/.ts.sock.9000")
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int)
        parser.add_argument("--metrics-config", help="metrics.yaml (model_metrics are pre-registered)")
        parser.add_argument("--async", dest="async_mode", action="store_true",
                            help="accepted for TorchServe compatibility; tserve always pipelines")
        return parser

    @staticmethod
    def extract_args(args: Sequence[str] | None = None) -> argparse.Namespace:
        """The worker's arguments, from ``args`` or ``sys.argv``."""
        return ArgParser.model_service_worker_args().parse_args(args)
