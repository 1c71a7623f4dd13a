package org.tserve.config;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/** Every config.properties key tserve knows, with its type and TorchServe's default. */
public final class ConfigKeys {
    /** Value types a key may have. */
    public enum Type { STRING, INT, LONG, BOOL, DOUBLE }

    /** A known key: its type and default (null = unset). */
    public static final class Key {
        public final String name;
        public final Type type;
        public final String defaultValue;
        /** True for keys TorchServe has that tserve accepts but does not act on. */
        public final boolean ignored;

        Key(String name, Type type, String defaultValue, boolean ignored) {
            this.name = name;
            this.type = type;
            this.defaultValue = defaultValue;
            this.ignored = ignored;
        }
    }

    private static final Map<String, Key> KEYS = new LinkedHashMap<>();

    private static void k(String name, Type type, String def) {
        KEYS.put(name, new Key(name, type, def, false));
    }

    private static void ignored(String name, Type type, String def) {
        KEYS.put(name, new Key(name, type, def, true));
    }

    static {
        k("inference_address", Type.STRING, "http://127.0.0.1:8080");
        k("management_address", Type.STRING, "http://127.0.0.1:8081");
        k("metrics_address", Type.STRING, "http://127.0.0.1:8082");
        k("grpc_inference_address", Type.STRING, "127.0.0.1");
        k("grpc_management_address", Type.STRING, "127.0.0.1");
        k("grpc_inference_port", Type.INT, "7070");
        k("grpc_management_port", Type.INT, "7071");
        k("grpc_inference_max_connection_age_ms", Type.LONG, String.valueOf(Long.MAX_VALUE));
        k("grpc_management_max_connection_age_ms", Type.LONG, String.valueOf(Long.MAX_VALUE));
        k("grpc_inference_max_connection_age_grace_ms", Type.LONG, String.valueOf(Long.MAX_VALUE));
        k("grpc_management_max_connection_age_grace_ms", Type.LONG, String.valueOf(Long.MAX_VALUE));
        // gRPC connection limits (both ports; docs/grpc.md, "Limits"): HTTP/2 abuse and idle clients
        k("grpc_max_connections", Type.INT, "1024");             // open connections per port; more are closed at accept
        k("grpc_max_concurrent_streams", Type.INT, "128");       // calls in flight on one connection
        k("grpc_max_rst_frames_per_window", Type.INT, "200");    // RST_STREAMs a client may send per window, then GOAWAY
        k("grpc_rst_frames_window_s", Type.INT, "10");
        k("grpc_keepalive_time_ms", Type.LONG, "7200000");       // server PINGs an idle connection this often
        k("grpc_keepalive_timeout_ms", Type.LONG, "20000");      // and closes it without a PING ack by then
        k("grpc_permit_keepalive_time_ms", Type.LONG, "300000"); // clients PINGing more often get GOAWAY
        k("grpc_permit_keepalive_without_calls", Type.BOOL, "false");
        k("grpc_max_connection_idle_ms", Type.LONG, "0");        // 0 = idle connections stay open
        k("enable_grpc_reflection", Type.BOOL, "true");
        k("enable_grpc_ssl", Type.BOOL, "false");
        k("private_key_file", Type.STRING, null);    // PEM key for https:// addresses and gRPC TLS (enable_grpc_ssl)
        k("certificate_file", Type.STRING, null);    // PEM certificate (chain) for the same
        k("keystore", Type.STRING, null);            // https:// addresses: a key store instead of the PEM files
        k("keystore_pass", Type.STRING, "changeit");
        k("keystore_type", Type.STRING, "PKCS12");
        k("model_store", Type.STRING, null);
        k("workflow_store", Type.STRING, null);   // where POST /workflows looks for .war files; default model_store
        k("load_models", Type.STRING, null);
        k("models", Type.STRING, null);
        // the models to start with (ModelSnapshot); config snapshots write it, KServe's runtime too
        k("model_snapshot", Type.STRING, null);
        // config snapshots kept in LOG_LOCATION/config (SnapshotStore), the oldest deleted first
        k("max_config_snapshots", Type.INT, "20");
        k("default_workers_per_model", Type.INT, "0");
        k("job_queue_size", Type.INT, "100");
        k("default_response_timeout", Type.INT, "120");
        k("default_startup_timeout", Type.INT, "120");
        k("unregister_model_timeout", Type.INT, "120");
        k("max_request_size", Type.INT, "6553500");
        k("max_response_size", Type.INT, "6553500");
        k("number_of_netty_threads", Type.INT, "0");
        k("netty_client_threads", Type.INT, "0");
        k("number_of_gpu", Type.INT, null);
        k("initial_worker_port", Type.INT, "9000");
        k("initial_distribution_port", Type.INT, "29500");
        k("enable_envvars_config", Type.BOOL, "false");
        k("disable_token_authorization", Type.BOOL, "false");
        k("token_expiration_min", Type.DOUBLE, "60");
        k("enable_model_api", Type.BOOL, "false");
        // liveness/readiness probes (/ping, /v2/health/*, model ready routes) answer without a token
        k("health_check_no_auth", Type.BOOL, "false");
        k("allowed_urls", Type.STRING, "file://.*|http(s)?://.*");
        k("cors_allowed_origin", Type.STRING, null);
        k("cors_allowed_methods", Type.STRING, null);
        k("cors_allowed_headers", Type.STRING, null);
        k("install_py_dep_per_model", Type.BOOL, "false");
        k("service_envelope", Type.STRING, null);
        k("decode_input_request", Type.BOOL, "true");
        k("default_service_handler", Type.STRING, null);
        k("blacklist_env_vars", Type.STRING, "");
        k("model_server_home", Type.STRING, null);
        k("limit_max_image_pixels", Type.BOOL, "true");
        k("metrics_mode", Type.STRING, "log");
        k("metrics_config", Type.STRING, null);
        k("enable_metrics_api", Type.BOOL, "true");
        k("model_metrics_auto_detect", Type.BOOL, "false");
        k("disable_system_metrics", Type.BOOL, "false");
        k("system_metrics_cmd", Type.STRING, "");
        k("metric_time_interval", Type.INT, "60");
        k("python", Type.STRING, "python3");
        k("version", Type.STRING, null);
        // tserve's own keys
        k("worker_socket_type", Type.STRING, "unix");
        k("max_download_size", Type.LONG, "10737418240");
        k("warm_worker_start", Type.BOOL, "true");
        k("warm_start_preload", Type.STRING, "torch");
        // what extracting one archive may produce (0 = no limit); see docs/reliability.md
        k("max_archive_extracted_size", Type.LONG, "68719476736");
        k("max_archive_entries", Type.LONG, "100000");
        k("max_archive_compression_ratio", Type.LONG, "200");
        // connections (all HTTP connectors together; 0 = no cap) and their time limits in seconds (0 = none):
        // idle = no request in flight and no traffic; read = from a request's first byte to its last
        k("max_connections", Type.INT, "10000");
        k("use_native_io", Type.BOOL, "true");   // Linux epoll for every socket (false, or not loadable: Java NIO)
        k("connection_idle_timeout", Type.INT, "120");
        k("request_read_timeout", Type.INT, "60");
        // per-model pip installs (install_py_dep_per_model): seconds pip may run (0 = no limit), and
        // whether pip may build source distributions (false: --only-binary :all:, no build code runs)
        k("install_py_dep_timeout", Type.INT, "600");
        k("install_py_dep_allow_source_builds", Type.BOOL, "false");
        // workers a scale or register may leave running (0 = no cap): one model, and the whole server
        k("max_workers_per_model", Type.INT, "256");
        k("max_workers", Type.INT, "1024");
        // handler exception text in error answers (false: a generic message; the detail stays in model_log.log)
        k("send_error_detail", Type.BOOL, "true");
        // one model across machines (docs/distributed.md, "Across machines")
        k("cluster_members", Type.STRING, "");
        k("cluster_leader", Type.STRING, null);
        k("cluster_address", Type.STRING, null);
        k("cluster_key", Type.STRING, null);
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
        k("vmargs", Type.STRING, null);    // JVM options, read by the torchserve launcher
        k("log_format", Type.STRING, "text");   // tserve's: the bundled log4j2 config, text or json (org.tserve.util.LogSetup)
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
