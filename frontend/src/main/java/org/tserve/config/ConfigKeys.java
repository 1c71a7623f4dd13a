package org.tserve.config;

import static org.tserve.config.ValueChecks.ADDRESS;
import static org.tserve.config.ValueChecks.AT_LEAST_ONE;
import static org.tserve.config.ValueChecks.METRICS_MODE;
import static org.tserve.config.ValueChecks.MODELS;
import static org.tserve.config.ValueChecks.MODEL_SNAPSHOT;
import static org.tserve.config.ValueChecks.NON_NEGATIVE;
import static org.tserve.config.ValueChecks.NO_LIMIT_IF_ZERO;
import static org.tserve.config.ValueChecks.POSITIVE;
import static org.tserve.config.ValueChecks.SOCKET_TYPE;
import static org.tserve.config.ValueChecks.URL_PATTERNS;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Every config.properties key tserve knows, each declared once: type, TorchServe's default, a doc
 * line and, where one exists, a check of its value. The type check, the check, the unknown-key
 * warning and docs/configuration.md ({@code gradle configDocs}) all follow from the declaration.
 */
public final class ConfigKeys {
    /** Value types a key may have. */
    public enum Type { STRING, INT, LONG, BOOL, DOUBLE }

    /** Checks a key's (type-checked) value; throws a ConfigException naming the key. */
    public interface Check {
        void check(String key, String value);
    }

    /** A known key: its type, default (null = unset), doc line and check (null = its type only). */
    public static final class Key {
        public final String name;
        public final Type type;
        public final String defaultValue;
        /** True for keys TorchServe has that tserve accepts but does not act on. */
        public final boolean ignored;
        public final String doc;
        public final Check check;

        Key(String name, Type type, String defaultValue, boolean ignored, String doc, Check check) {
            this.name = name;
            this.type = type;
            this.defaultValue = defaultValue;
            this.ignored = ignored;
            this.doc = doc;
            this.check = check;
        }
    }

    private static final Map<String, Key> KEYS = new LinkedHashMap<>();

    /** Kept so that a key merged in without a doc line still compiles; ConfigKeysDocTest then names it. */
    private static void k(String name, Type type, String def) {
        k(name, type, def, "", null);
    }

    private static void k(String name, Type type, String def, String doc) {
        k(name, type, def, doc, null);
    }

    private static void k(String name, Type type, String def, String doc, Check check) {
        KEYS.put(name, new Key(name, type, def, false, doc, check));
    }

    private static void ignored(String name, Type type, String def) {
        KEYS.put(name, new Key(name, type, def, true, "TorchServe's; accepted without effect in tserve", null));
    }

    static {
        k("inference_address", Type.STRING, "http://127.0.0.1:8080",
                "REST inference API: predictions, KServe, SageMaker routes (http[s]://host:port)", ADDRESS);
        k("management_address", Type.STRING, "http://127.0.0.1:8081",
                "REST management API: register, scale, describe, unregister, token", ADDRESS);
        k("metrics_address", Type.STRING, "http://127.0.0.1:8082", "Prometheus metrics API: /metrics", ADDRESS);
        k("grpc_inference_address", Type.STRING, "127.0.0.1", "Host of the gRPC inference service");
        k("grpc_management_address", Type.STRING, "127.0.0.1", "Host of the gRPC management service");
        k("grpc_inference_port", Type.INT, "7070", "Port of the gRPC inference service");
        k("grpc_management_port", Type.INT, "7071", "Port of the gRPC management service");
        k("grpc_inference_max_connection_age_ms", Type.LONG, String.valueOf(Long.MAX_VALUE),
                "gRPC inference connections are closed (GOAWAY) after this long");
        k("grpc_management_max_connection_age_ms", Type.LONG, String.valueOf(Long.MAX_VALUE),
                "gRPC management connections are closed (GOAWAY) after this long");
        k("grpc_inference_max_connection_age_grace_ms", Type.LONG, String.valueOf(Long.MAX_VALUE),
                "Time calls on an aged inference connection get to finish");
        k("grpc_management_max_connection_age_grace_ms", Type.LONG, String.valueOf(Long.MAX_VALUE),
                "Time calls on an aged management connection get to finish");
        // gRPC connection limits (both ports; docs/grpc.md, "Limits"): HTTP/2 abuse and idle clients
        k("grpc_max_connections", Type.INT, "1024", "Open connections per gRPC port; more are closed at accept");
        k("grpc_max_concurrent_streams", Type.INT, "128", "gRPC calls in flight on one connection");
        k("grpc_max_rst_frames_per_window", Type.INT, "200", "RST_STREAMs a client may send per window, then GOAWAY");
        k("grpc_rst_frames_window_s", Type.INT, "10", "Seconds of the RST_STREAM window");
        k("grpc_keepalive_time_ms", Type.LONG, "7200000", "The server PINGs an idle gRPC connection this often (at least 10000: gRPC raises less to it, with a warning)");
        k("grpc_keepalive_timeout_ms", Type.LONG, "20000", "and closes it when that PING is not acknowledged by then");
        k("grpc_permit_keepalive_time_ms", Type.LONG, "300000", "Clients PINGing more often than this get GOAWAY");
        k("grpc_permit_keepalive_without_calls", Type.BOOL, "false",
                "Clients may send keepalive PINGs with no call open");
        k("grpc_max_connection_idle_ms", Type.LONG, "0",
                "Idle gRPC connections are closed after this long (0 = never)");
        k("enable_grpc_reflection", Type.BOOL, "true", "Serve gRPC server reflection (grpcurl list)");
        k("enable_grpc_ssl", Type.BOOL, "false", "TLS on the gRPC ports, with private_key_file and certificate_file");
        k("private_key_file", Type.STRING, null, "PEM key for https:// addresses and gRPC TLS (enable_grpc_ssl)");
        k("certificate_file", Type.STRING, null, "PEM certificate (chain) for the same");
        k("keystore", Type.STRING, null, "https:// addresses: a key store instead of the PEM files");
        k("keystore_pass", Type.STRING, "changeit", "Password of the keystore");
        k("keystore_type", Type.STRING, "PKCS12", "Type of the keystore (PKCS12, JKS)");
        k("model_store", Type.STRING, null, "Directory holding .mar archives (--model-store)");
        k("workflow_store", Type.STRING, null, "Where POST /workflows looks for .war files (default model_store)");
        k("load_models", Type.STRING, null,
                "Models loaded at startup: all, or a comma list of ARCHIVE or NAME=ARCHIVE (`--models`/`-m` values "
                        + "are split on commas the same way, as TorchServe's are)");
        k("models", Type.STRING, null, "Per-model settings as JSON: name → version → model-config.yaml keys", MODELS);
        k("model_snapshot", Type.STRING, null,
                "The models to start with, as config snapshots and KServe's runtime write them", MODEL_SNAPSHOT);
        k("max_config_snapshots", Type.INT, "20",
                "Config snapshots kept in LOG_LOCATION/config, the oldest deleted first", AT_LEAST_ONE);
        k("default_workers_per_model", Type.INT, "0",
                "Workers per model when neither the registration nor model-config.yaml says", NON_NEGATIVE);
        k("job_queue_size", Type.INT, "100",
                "Per-model queue capacity; a full queue answers 503 (model-config.yaml: jobQueueSize)", POSITIVE);
        k("default_response_timeout", Type.INT, "120",
                "Seconds a worker may take to answer one batch (model-config.yaml: responseTimeout)", NON_NEGATIVE);
        k("default_startup_timeout", Type.INT, "120",
                "Seconds a worker may take to start and load (model-config.yaml: startupTimeout)", NON_NEGATIVE);
        k("unregister_model_timeout", Type.INT, "120",
                "Seconds unregistering a model may take to stop its workers", NON_NEGATIVE);
        k("max_request_size", Type.INT, "6553500", "Largest request body, in bytes", POSITIVE);
        k("max_response_size", Type.INT, "6553500", "Largest response body, in bytes", POSITIVE);
        k("max_form_fields", Type.INT, "1000", "Fields of one URL-encoded form or parts of one multipart body; more "
                + "answer 413 (form) / 400 (multipart)", POSITIVE);
        k("max_form_key_length", Type.INT, "1024", "Longest field name of a URL-encoded form, in characters; "
                + "longer answers 400", POSITIVE);
        k("max_form_decoded_size", Type.INT, "6553500", "Decoded bytes (names and values) of one URL-encoded "
                + "form; more answer 413", POSITIVE);
        k("number_of_netty_threads", Type.INT, "0",
                "Netty event-loop threads of the REST servers (0 = one per core)", NON_NEGATIVE);
        k("netty_client_threads", Type.INT, "0", "TorchServe's worker-connection threads; shown at startup, unused");
        k("number_of_gpu", Type.INT, null, "Accelerators to use (default: all detected; 0 = CPU only)");
        k("initial_worker_port", Type.INT, "9000", "First worker socket number; each new worker takes the next");
        k("initial_distribution_port", Type.INT, "29500", "First port of the ranges given to torchrun workers");
        k("enable_envvars_config", Type.BOOL, "false", "Read TS_<KEY> environment variables as overrides of the keys");
        k("disable_token_authorization", Type.BOOL, "false", "Turn token authorization off (--disable-token-auth)");
        k("token_expiration_min", Type.DOUBLE, "60", "Minutes before the inference and management keys expire");
        k("enable_model_api", Type.BOOL, "false", "Allow registering and unregistering models through the APIs");
        k("health_check_no_auth", Type.BOOL, "false", "Probes (/ping, /v2/health/*, model ready routes) answer without a token");
        k("allowed_urls", Type.STRING, "file://.*|http(s)?://.*",
                "Regexes (comma-separated) an archive URL must match", URL_PATTERNS);
        k("cors_allowed_origin", Type.STRING, null, "CORS Access-Control-Allow-Origin added to every response");
        k("cors_allowed_methods", Type.STRING, null, "CORS Access-Control-Allow-Methods added to every response");
        k("cors_allowed_headers", Type.STRING, null, "CORS Access-Control-Allow-Headers added to every response");
        k("install_py_dep_per_model", Type.BOOL, "false",
                "pip-install an archive's requirements for that model before its workers start");
        k("service_envelope", Type.STRING, null, "Request envelope for every model: kserve, kservev2, json or body");
        k("decode_input_request", Type.BOOL, "true", "Decode JSON and text inputs before the handler sees them");
        k("default_service_handler", Type.STRING, null, "Handler of archives that name none");
        k("blacklist_env_vars", Type.STRING, "", "Regex of environment variables the workers do not get");
        k("model_server_home", Type.STRING, null, "tserve's installation directory (TS_MODEL_SERVER_HOME)");
        k("limit_max_image_pixels", Type.BOOL, "true", "Keep PIL's decompression-bomb limit in the image handlers");
        k("metrics_mode", Type.STRING, "log", "log (metric log files) or prometheus (/metrics); legacy", METRICS_MODE);
        k("metrics_config", Type.STRING, null, "metrics.yaml to use (default: ts/configs/metrics.yaml)");
        k("enable_metrics_api", Type.BOOL, "true", "Serve the metrics API");
        k("metrics_negotiation", Type.BOOL, "false",
                "GET /metrics answers OpenMetrics or protobuf when Accept asks (counter samples then end in _total)");
        k("model_metrics_auto_detect", Type.BOOL, "false",
                "Register model metrics missing from metrics.yaml when first emitted");
        k("disable_system_metrics", Type.BOOL, "false", "Do not collect system metrics");
        k("system_metrics_cmd", Type.STRING, "", "TorchServe's custom system-metrics command; read, unused");
        k("metric_time_interval", Type.INT, "60", "Seconds between system metrics");
        k("python", Type.STRING, "python3", "Python interpreter of the workers (--python)");
        k("version", Type.STRING, null, "TorchServe's version field of config snapshots; read, unused");
        // tserve's own keys
        k("worker_socket_type", Type.STRING, "unix", "Sockets to the workers: unix or tcp", SOCKET_TYPE);
        k("max_download_size", Type.LONG, "10737418240", "Bytes an archive fetched over http(s) may have");
        k("warm_worker_start", Type.BOOL, "true",
                "Fork plain workers from a zygote that imported warm_start_preload once");
        k("warm_start_preload", Type.STRING, "torch", "Modules the warm-start zygote imports (comma list; empty: none, workers still fork)");
        // what extracting one archive may produce (0 = no limit); see docs/reliability.md
        k("max_archive_extracted_size", Type.LONG, "68719476736",
                "Bytes unpacking one archive may produce", NO_LIMIT_IF_ZERO);
        k("max_archive_entries", Type.LONG, "100000", "Entries one archive may have", NO_LIMIT_IF_ZERO);
        k("max_archive_compression_ratio", Type.LONG, "200",
                "Extracted bytes per archive byte, checked past 16 MiB", NO_LIMIT_IF_ZERO);
        // connections (all HTTP connectors together; 0 = no cap) and their time limits in seconds (0 = none):
        // idle = no request in flight and no traffic; read = from a request's first byte to its last
        k("max_connections", Type.INT, "10000",
                "REST connections open over all ports; one more gets 503 (0 = no cap)", NON_NEGATIVE);
        k("use_native_io", Type.BOOL, "true", "Linux epoll for every socket (false, or not loadable: Java NIO)");
        k("connection_idle_timeout", Type.INT, "120",
                "Seconds a connection with no request in flight stays open (0 = no limit)", NON_NEGATIVE);
        k("request_read_timeout", Type.INT, "60",
                "Seconds a request may take to arrive completely, else 408 (0 = no limit)", NON_NEGATIVE);
        // per-model pip installs (install_py_dep_per_model): seconds pip may run (0 = no limit), and
        // whether pip may build source distributions (false: --only-binary :all:, no build code runs)
        k("install_py_dep_timeout", Type.INT, "600", "Seconds pip may run for one model (0 = no limit)", NON_NEGATIVE);
        k("install_py_dep_allow_source_builds", Type.BOOL, "false",
                "pip may build source distributions (false: wheels only)");
        // workers a scale or register may leave running (0 = no cap): one model, and the whole server
        k("max_workers_per_model", Type.INT, "256", "Workers one model may run (0 = no cap)", NON_NEGATIVE);
        k("max_workers", Type.INT, "1024", "Workers the whole server may run (0 = no cap)", NON_NEGATIVE);
        k("send_error_detail", Type.BOOL, "true", "Handler exception text in error answers (false: a generic message)");
        k("compatibility", Type.STRING, "",
                "torchserve-0.12: answer every deliberate difference as TorchServe 0.12 does (docs/compatibility.md)",
                (key, v) -> Compatibility.parse(v));
        // one model across machines (docs/distributed.md, "Across machines")
        k("cluster_members", Type.STRING, "", "Member nodes of a model across machines (docs/distributed.md)");
        k("cluster_leader", Type.STRING, null, "On a member: the leader's address (--member-of)");
        k("cluster_address", Type.STRING, null, "This node's address as the other nodes reach it");
        k("cluster_key", Type.STRING, null, "Secret the nodes of a cluster share");
        // TorchServe keys accepted for compatibility but without effect in tserve
        ignored("async_logging", Type.BOOL, "false");
        ignored("prefer_direct_buffer", Type.BOOL, "false");
        ignored("io_ratio", Type.INT, "50");
        ignored("use_env_allowed_urls", Type.BOOL, "false");
        ignored("ts_open_inference_protocol", Type.BOOL, "false");
        ignored("ts_header_key_sequence_id", Type.STRING, null);
        ignored("ts_header_key_sequence_start", Type.STRING, null);
        ignored("ts_header_key_sequence_end", Type.STRING, null);
        ignored("ipex_enable", Type.BOOL, "false");
        ignored("ipex_gpu_enable", Type.BOOL, "false");
        ignored("cpu_launcher_enable", Type.BOOL, "false");
        ignored("cpu_launcher_args", Type.STRING, null);
        ignored("cpp_log_config", Type.STRING, null);
        ignored("debug", Type.BOOL, "false");
        ignored("metrics_format", Type.STRING, null);   // in KServe's config.properties; TorchServe reads metrics_mode
        k("vmargs", Type.STRING, null, "JVM options for the frontend, read by the torchserve launcher");
        k("log_format", Type.STRING, "text",
                "The bundled log4j2 config's layout: text or json (org.tserve.util.LogSetup)");
        ignored("plugins_path", Type.STRING, null);
    }

    private ConfigKeys() {
    }

    /** The known key, or null. */
    public static Key get(String name) {
        return KEYS.get(name);
    }

    /** All known keys in declaration order. */
    public static Map<String, Key> all() {
        return Collections.unmodifiableMap(KEYS);
    }
}
