package org.tserve;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;
import java.util.stream.Stream;
import org.apache.logging.log4j.Logger;
import org.tserve.archive.ModelArchive;
import org.tserve.auth.TokenAuthorization;
import org.tserve.config.Arguments;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSnapshot;
import org.tserve.config.SnapshotStore;
import org.tserve.http.HttpServer;
import org.tserve.server.ServerContext;
import org.tserve.server.ServerExtension;
import org.tserve.server.ServerVersion;
import org.tserve.util.LogConfigException;
import org.tserve.util.LogSetup;
import org.tserve.util.Logging;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.api.RegisterRequest;
import org.tserve.wlm.api.StatusResult;
import org.tserve.wlm.api.WlmException;
import org.tserve.wlm.supervision.WorkerEnvironment;

/**
 * The tserve frontend process: reads the configuration, writes the token file, binds the REST
 * connectors, starts extensions (gRPC, metrics), loads startup models and prints
 * {@code Model server started.}; SIGTERM stops it cleanly with exit status 0.
 */
public final class ModelServer {
    /** Not a static field: a logger created before main configures log4j2 would start it with no config chosen. */
    private static Logger log() {
        return Logging.logger(ModelServer.class);
    }
    private final ConfigManager cfg;
    private final Path socketDir;
    /** The launcher's zygote ({@code --zygote PID:SOCKET}), or null. */
    private final String launcherZygote;
    private TokenAuthorization tokens;
    private ModelManager models;
    private HttpServer http;
    private org.tserve.wlm.supervision.WarmStarter warmStart;
    /** Writes config snapshots (null with -ncs). */
    private SnapshotStore snapshots;
    private final List<ServerExtension> extensions = new ArrayList<>();

    ModelServer(ConfigManager cfg, Path socketDir, String launcherZygote) {
        this.cfg = cfg;
        this.socketDir = socketDir;
        this.launcherZygote = launcherZygote;
    }

    /** The server's version (ts/version.txt under model_server_home). */
    public static String version() {
        return ServerVersion.get();
    }

    public static void main(String[] args) {
        LogSetup.prepare();   // before any logger exists
        ConfigManager cfg;
        Arguments a;
        String logConfig;
        try {
            a = Arguments.parse(args);
            cfg = new ConfigManager(a, System.getenv());
            logConfig = LogSetup.start(cfg.get("log_format"));
        } catch (ConfigException | LogConfigException e) {
            System.err.println("ERROR: " + e.getMessage());
            System.exit(1);
            return;
        }
        log().info("Log config: " + logConfig);
        Path sockDir;
        try {
            sockDir = SocketDir.choose(System.getProperty("java.io.tmpdir"), ProcessHandle.current().pid());
        } catch (ConfigException e) {
            log().error(e.getMessage());
            System.err.println("ERROR: " + e.getMessage());
            LogSetup.stop();
            Runtime.getRuntime().halt(1);
            return;
        }
        ModelServer server = new ModelServer(cfg, sockDir, a.zygote);
        try {
            server.start();
        } catch (ConfigException e) {
            log().error(e.getMessage());
            System.err.println("ERROR: " + e.getMessage());
            server.cleanupQuietly();
            LogSetup.stop();
            Runtime.getRuntime().halt(1);
        } catch (Exception e) {
            log().error("Server failed to start: " + e);
            System.err.println("ERROR: server failed to start: " + e);
            server.cleanupQuietly();
            LogSetup.stop();
            Runtime.getRuntime().halt(1);
        }
    }

    void start() throws Exception {
        String home = cfg.getModelServerHome();
        Path versionFile = Paths.get(home, "ts", "version.txt");
        if (Files.isRegularFile(versionFile)) {
            ServerVersion.set(new String(Files.readAllBytes(versionFile), StandardCharsets.UTF_8).trim());
        }
        for (String w : cfg.getWarnings()) {
            log().warn(w);
        }
        String store = cfg.getModelStore();
        if (store != null && !new File(store).isDirectory()) {
            throw new ConfigException("Model store " + store + " is not a directory (model_store / -s)");
        }
        String metricsCfg = cfg.get("metrics_config");
        if (metricsCfg == null || metricsCfg.isEmpty()) {
            Path def = Paths.get(home, "ts", "configs", "metrics.yaml");
            metricsCfg = Files.isRegularFile(def) ? def.toString() : null;
        }
        banner(home, metricsCfg);
        Files.createDirectories(socketDir);
        if (launcherZygote != null) {   // the launcher started it before this JVM: its import overlaps our start
            warmStart = org.tserve.wlm.supervision.WarmStarter.adopt(launcherZygote, home, cfg.getBool("warm_worker_start"));
        } else if (cfg.getBool("warm_worker_start")) {   // first: the zygote imports torch while the server starts
            warmStart = org.tserve.wlm.supervision.WarmStarter.start(cfg.getPython(), socketDir, home, cfg.get("warm_start_preload"),
                    cfg.get("blacklist_env_vars"));
        }
        tokens = new TokenAuthorization(cfg.isTokenAuthEnabled(), Paths.get(System.getProperty("user.dir"), "key_file.json"),
                cfg.getDouble("token_expiration_min"));
        tokens.init();
        if (tokens.isEnabled()) {
            log().info("Token authorization is on: keys are in " + tokens.getFile());
        }
        WorkerEnvironment env = new WorkerEnvironment(cfg.getPython(), socketDir, home, metricsCfg,
                cfg.getBool("decode_input_request"), cfg.get("worker_socket_type").equals("tcp"), cfg.get("blacklist_env_vars"),
                cfg.getBool("limit_max_image_pixels"), cfg.get("service_envelope"), warmStart)
                .withSendErrorDetail(cfg.getBool("send_error_detail"));
        org.tserve.archive.ExtractionLimits.setCurrent(new org.tserve.archive.ExtractionLimits(
                cfg.getLong("max_archive_extracted_size"), cfg.getLong("max_archive_entries"),
                cfg.getLong("max_archive_compression_ratio")));
        models = new ModelManager(cfg, env, Paths.get(System.getProperty("java.io.tmpdir")));
        // from before the first port opens (gRPC's, in an extension): /ping, readiness and gRPC health
        // say Unhealthy / NOT_SERVING until the startup models are loaded
        models.setLoadingStartupModels(true);
        Runtime.getRuntime().addShutdownHook(new Thread(this::shutdownAndHalt, "shutdown"));
        ServerContext context = new ServerContext(cfg, models, tokens);
        for (ServerExtension e : ServiceLoader.load(ServerExtension.class)) {
            e.start(context);
            extensions.add(e);
            for (String line : e.bannerLines()) {
                System.out.println(line);
            }
        }
        http = new HttpServer(context, extensions);
        http.start();
        try {
            ModelSnapshot snapshot = cfg.getModelSnapshot();
            if (snapshot != null) {
                if (!cfg.getStartupModels().isEmpty()) {
                    log().warn("model_snapshot names the models to start with: load_models / --models "
                            + cfg.getStartupModels() + " are ignored, as in TorchServe");
                }
                log().info("Restoring " + snapshot.versions().size() + " model versions from model_snapshot"
                        + (cfg.isFromSnapshot() ? " of config snapshot " + cfg.getConfigFile() : ""));
                int loaded = new ModelSnapshotLoader(models, store).load(snapshot);
                models.setStartupModelsFailed(!snapshot.versions().isEmpty() && loaded == 0);
            } else {
                loadStartupModels(store);
            }
        } finally {
            models.setLoadingStartupModels(false);
        }
        if (cfg.isSnapshotsEnabled()) {
            snapshots = new SnapshotStore(SnapshotStore.directory(System.getenv()), cfg.getInt("max_config_snapshots"),
                    cfg.configured(), models::snapshot);
            snapshots.writeNow("startup");
            models.onChange(snapshots::changed);
        }
        log().info("Inference API bound to " + cfg.address("inference_address") + ", management API bound to "
                + cfg.address("management_address"));
        System.out.println("Model server started.");
        System.out.flush();
    }

    private void banner(String home, String metricsCfg) {
        Runtime rt = Runtime.getRuntime();
        String[][] lines = {
            {"Torchserve version", ServerVersion.get()},
            {"TS Home", home},
            {"Current directory", System.getProperty("user.dir")},
            {"Temp directory", System.getProperty("java.io.tmpdir")},
            {"Metrics config path", String.valueOf(metricsCfg)},
            {"Number of GPUs", String.valueOf(cfg.getNumberOfGpu())},
            {"Number of CPUs", String.valueOf(rt.availableProcessors())},
            {"Max heap size", (rt.maxMemory() / (1024 * 1024)) + " M"},
            {"Python executable", cfg.getPython()},
            {"Config file", String.valueOf(cfg.getConfigFile())},
            {"Inference address", cfg.address("inference_address").toString()},
            {"Management address", cfg.address("management_address").toString()},
            {"Metrics address", cfg.address("metrics_address").toString()},
            {"Model Store", String.valueOf(cfg.getModelStore())},
            {"Initial Models", cfg.getStartupModels().isEmpty() ? "N/A" : String.join(",", cfg.getStartupModels())},
            {"Log dir", Logging.logDir().toString()},
            {"Metrics dir", Logging.metricsDir().toString()},
            {"Netty threads", cfg.get("number_of_netty_threads")},
            {"Netty client threads", cfg.get("netty_client_threads")},
            {"Default workers per model", cfg.get("default_workers_per_model")},
            {"Blacklist Regex", cfg.get("blacklist_env_vars").isEmpty() ? "N/A" : cfg.get("blacklist_env_vars")},
            {"Maximum Response Size", cfg.get("max_response_size")},
            {"Maximum Request Size", cfg.get("max_request_size")},
            {"Limit Maximum Image Pixels", cfg.get("limit_max_image_pixels")},
            {"Allowed Urls", cfg.allowedUrls().toString()},
            {"Custom python dependency for model allowed", cfg.get("install_py_dep_per_model")},
            {"Enable metrics API", cfg.get("enable_metrics_api")},
            {"Metrics mode", cfg.get("metrics_mode").toUpperCase(java.util.Locale.ROOT)},
            {"Disable system metrics", cfg.get("disable_system_metrics")},
            {"Workflow Store", String.valueOf(cfg.getWorkflowStore())},
            {"Model config", cfg.get("models") == null ? "N/A" : cfg.get("models")},
            {"Model API enabled", String.valueOf(cfg.isModelApiEnabled())},
            {"Token authorization enabled", String.valueOf(cfg.isTokenAuthEnabled())},
        };
        StringBuilder sb = new StringBuilder();
        for (String[] l : lines) {
            sb.append(l[0]).append(": ").append(l[1]).append(System.lineSeparator());
        }
        System.out.print(sb);
        System.out.flush();
        log().info("Configuration: " + sb.toString().trim().replace(System.lineSeparator(), ", "));
    }

    private void loadStartupModels(String store) throws IOException {
        List<String[]> specs = new ArrayList<>();
        for (String m : cfg.getStartupModels()) {
            if (m.equalsIgnoreCase("all")) {
                if (store == null) {
                    throw new ConfigException("Cannot load 'all' models: no model store configured (model_store / -s)");
                }
                try (Stream<Path> s = Files.list(Paths.get(store))) {
                    s.sorted().forEach(p -> {
                        String n = p.getFileName().toString();
                        if (!n.startsWith(".") && (Files.isDirectory(p) || n.endsWith(".mar") || n.endsWith(".tar.gz")
                                || n.endsWith(".tgz") || n.endsWith(".model"))) {
                            specs.add(new String[] {null, n});
                        }
                    });
                }
            } else if (m.contains("=")) {
                specs.add(new String[] {m.substring(0, m.indexOf('=')), m.substring(m.indexOf('=') + 1)});
            } else {
                specs.add(new String[] {null, m});
            }
        }
        int loaded = 0;
        for (String[] s : specs) {
            RegisterRequest r = new RegisterRequest(s[1]);
            r.modelName = s[0];
            r.loadedAtStartup = true;
            r.synchronous = true;
            try {
                StatusResult res = models.register(r);
                log().info("Startup model " + s[1] + ": " + res.message());
                loaded++;
            } catch (WlmException e) {
                log().error("Failed to load model: " + s[1] + ": " + e.getMessage());
            }
        }
        models.setStartupModelsFailed(!specs.isEmpty() && loaded == 0);
    }

    private void shutdownAndHalt() {
        log().info("Shutting down: no new connections; answering in-flight requests, then stopping workers");
        for (ServerExtension e : extensions) {
            try {
                e.stop();
            } catch (RuntimeException ex) {
                log().warn("extension stop failed: " + ex);
            }
        }
        if (http != null) {
            http.stopAccepting();
        }
        if (snapshots != null) {
            models.onChange(() -> { });
            snapshots.writeNow("shutdown");   // before the models are unregistered: what a restart restores
            snapshots.close();
        }
        if (models != null) {
            models.shutdown();
        }
        if (http != null) {
            http.shutdown();
        }
        if (warmStart != null) {
            warmStart.stop();
        }
        cleanupQuietly();
        log().info("Server stopped.");
        LogSetup.stop();
        Runtime.getRuntime().halt(0);
    }

    private void cleanupQuietly() {
        ModelArchive.deleteTree(socketDir);
    }
}
