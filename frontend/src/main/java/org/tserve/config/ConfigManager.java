package org.tserve.config;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.Reader;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * The server configuration: config.properties, then the command line, then {@code TS_*}
 * environment variables (only with {@code enable_envvars_config=true}), like TorchServe.
 * Every value is type-checked at load time; unknown keys produce a warning naming them.
 */
public final class ConfigManager {

    private final Map<String, String> values = new TreeMap<>();
    private final List<String> warnings = new ArrayList<>();
    private final List<String> startupModels = new ArrayList<>();
    private final String configFile;
    /** The file read is the latest config snapshot (no --ts-config given). */
    private final boolean fromSnapshot;
    /** Config snapshots are written (no -ncs). */
    private final boolean snapshotsEnabled;

    /** A host and port parsed from an {@code http[s]://host:port} address. */
    public static final class Address {
        public final String host;
        public final int port;
        /** {@code https://}: the connector speaks TLS (see {@link org.tserve.http.TlsContexts}). */
        public final boolean tls;

        Address(String host, int port, boolean tls) {
            this.host = host;
            this.port = port;
            this.tls = tls;
        }

        @Override
        public String toString() {
            return (tls ? "https://" : "http://") + host + ":" + port;
        }
    }

    /**
     * Loads and validates the configuration for a server run. The file, as TorchServe chooses it:
     * {@code TS_CONFIG_FILE}, else {@code -f/--ts-config}, else (unless {@code -ncs}) the latest
     * config snapshot in {@code <LOG_LOCATION>/config/}, else {@code ./config.properties}.
     */
    public ConfigManager(Arguments args, Map<String, String> env) {
        String file = env.get("TS_CONFIG_FILE");
        if (file == null || file.isEmpty()) {
            file = args.configFile;
        }
        boolean fromSnapshot = false;
        if ((file == null || file.isEmpty()) && !args.noConfigSnapshot) {
            java.nio.file.Path latest = SnapshotStore.latest(SnapshotStore.directory(env));
            if (latest != null) {
                file = latest.toString();
                fromSnapshot = true;
            }
        }
        if ((file == null || file.isEmpty()) && new File("config.properties").isFile()) {
            file = new File("config.properties").getAbsolutePath();
        }
        this.configFile = file;
        this.fromSnapshot = fromSnapshot;
        this.snapshotsEnabled = !args.noConfigSnapshot;
        try {
            load(args, env, file);
        } catch (ConfigException e) {
            if (!fromSnapshot) {
                throw e;
            }
            throw new ConfigException("Config snapshot " + file + " (restored because no --ts-config was given) is not "
                    + "usable: " + e.getMessage() + ". Start with --ts-config FILE (it wins over snapshots) or --ncs, "
                    + "or delete that snapshot to fall back to the one before it");
        }
    }

    private void load(Arguments args, Map<String, String> env, String file) {
        Properties props = new Properties();
        if (file != null && !file.isEmpty()) {
            File f = new File(file);
            if (!f.isFile()) {
                throw new ConfigException("Config file not found: " + file + " (given with -f/--ts-config-file or TS_CONFIG_FILE)");
            }
            try (InputStream in = Files.newInputStream(f.toPath());
                 Reader r = new InputStreamReader(in, StandardCharsets.UTF_8)) {
                props.load(r);
            } catch (IOException e) {
                throw new ConfigException("Cannot read config file " + file + ": " + e.getMessage());
            }
        }
        for (String name : props.stringPropertyNames()) {
            String comment = ValueChecks.inlineComment(props.getProperty(name));
            if (comment != null) {
                // .properties has no inline comments: the text after '#' is part of the value
                warnings.add("Configuration key '" + name + "' in " + file + " looks like it carries an inline comment ("
                        + comment + "): .properties files have comments only on lines of their own, so this text is "
                        + "part of the value; move the comment to a line starting with #");
            }
            put(name, ValueChecks.substituteEnv(name, props.getProperty(name).trim(), env), "config file");
        }
        if (args.python != null) {
            values.put("python", args.python);
        }
        if (args.modelStore != null) {
            values.put("model_store", args.modelStore);
        }
        if (args.workflowStore != null) {
            values.put("workflow_store", args.workflowStore);
        }
        if (args.disableTokenAuth) {
            values.put("disable_token_authorization", "true");
        }
        if (args.enableModelApi) {
            values.put("enable_model_api", "true");
        }
        if (args.memberOf != null) {
            values.put("cluster_leader", args.memberOf);
        }
        if (Boolean.parseBoolean(get("enable_envvars_config"))) {
            for (Map.Entry<String, String> e : env.entrySet()) {
                String k = e.getKey();
                if (!k.startsWith("TS_") || k.equals("TS_CONFIG_FILE")) {
                    continue;
                }
                String key = k.substring(3).toLowerCase(Locale.ROOT);
                if (ConfigKeys.get(key) != null) {
                    put(key, e.getValue(), "environment variable " + k);
                }
            }
        }
        String home = env.get("TS_MODEL_SERVER_HOME");
        if (home == null || home.isEmpty()) {
            home = System.getProperty("model_server_home");
        }
        if (home != null && !home.isEmpty()) {
            values.put("model_server_home", home);
        }
        // TorchServe joins the -m values into load_models and splits that on commas: `-m a.mar,b.mar` is two
        String lm = args.models.isEmpty() ? get("load_models") : String.join(",", args.models);
        if (lm != null) {
            for (String m : lm.split(",")) {
                if (!m.trim().isEmpty()) {
                    startupModels.add(m.trim());
                }
            }
        }
        validate();
    }

    private void put(String name, String value, String source) {
        ConfigKeys.Key key = ConfigKeys.get(name);
        if (key == null) {
            warnings.add("Unknown configuration key '" + name + "' in " + source + " is ignored");
        } else if (key.ignored) {
            warnings.add("Configuration key '" + name + "' is accepted for TorchServe compatibility but has no effect in tserve");
        }
        ValueChecks.checkType(name, value, source);
        values.put(name, value);
    }

    /** Runs each declared key's check on its effective value (defaults included). */
    private void validate() {
        Compatibility policy = Compatibility.parse(get("compatibility"));
        Compatibility.install(policy);
        for (Map.Entry<String, String> e : values.entrySet()) {   // booleans: once the policy is known
            ValueChecks.checkBool(e.getKey(), e.getValue(), policy);
        }
        for (ConfigKeys.Key k : ConfigKeys.all().values()) {
            String v = get(k.name);
            if (k.check != null && v != null) {
                k.check.check(k.name, v);
            }
        }
    }

    /** Warnings collected while loading (unknown or ignored keys); the server logs them. */
    public List<String> getWarnings() {
        return Collections.unmodifiableList(warnings);
    }

    /** The config file that was read, or null. */
    public String getConfigFile() {
        return configFile;
    }

    /** The raw value of a key, with its default when unset. */
    public String get(String key) {
        String v = values.get(key);
        if (v != null) {
            return v.trim();
        }
        ConfigKeys.Key k = ConfigKeys.get(key);
        return k == null ? null : k.defaultValue;
    }

    public int getInt(String key) {
        return Integer.parseInt(get(key));
    }

    public long getLong(String key) {
        return Long.parseLong(get(key));
    }

    public boolean getBool(String key) {
        return Boolean.parseBoolean(get(key));
    }

    public double getDouble(String key) {
        return Double.parseDouble(get(key));
    }

    /**
     * Parses an {@code http[s]://host[:port]} address key; without a port, TorchServe's defaults
     * (http 80/8081/8082, https 443/8444/8445 for inference/management/metrics).
     */
    public Address address(String key) {
        return parseAddress(key, get(key));
    }

    static Address parseAddress(String key, String v) {
        String form = " is not an address of the form http://host:port or https://host:port";
        try {
            URI u = new URI(v);
            String scheme = u.getScheme() == null ? "" : u.getScheme().toLowerCase(Locale.ROOT);
            if (!(scheme.equals("http") || scheme.equals("https")) || u.getHost() == null) {
                throw new ConfigException("Configuration key '" + key + "' = " + v + form);
            }
            boolean tls = scheme.equals("https");
            int defaultPort = key.startsWith("inference") ? (tls ? 443 : 80)
                    : key.startsWith("management") ? (tls ? 8444 : 8081) : (tls ? 8445 : 8082);
            return new Address(u.getHost(), u.getPort() < 0 ? defaultPort : u.getPort(), tls);
        } catch (URISyntaxException e) {
            throw new ConfigException("Configuration key '" + key + "' = " + v + form);
        }
    }

    // ---- typed accessors used across the server ----

    public String getModelStore() {
        String s = get("model_store");
        return s == null || s.isEmpty() ? null : new File(s).getAbsolutePath();
    }

    /** Where workflow archives (.war) are looked up: workflow_store, else the model store. */
    public String getWorkflowStore() {
        String s = get("workflow_store");
        return s == null || s.isEmpty() ? getModelStore() : new File(s).getAbsolutePath();
    }

    public List<String> getStartupModels() {
        return Collections.unmodifiableList(startupModels);
    }

    public String getPython() {
        return get("python");
    }

    public String getModelServerHome() {
        String h = get("model_server_home");
        return h == null || h.isEmpty() ? new File(".").getAbsoluteFile().getParent() : h;
    }

    public boolean isTokenAuthEnabled() {
        return !getBool("disable_token_authorization");
    }

    public boolean isModelApiEnabled() {
        return getBool("enable_model_api");
    }

    public List<String> allowedUrls() {
        return splitList(get("allowed_urls"));
    }

    /** The non-empty, trimmed items of a comma list. */
    static List<String> splitList(String v) {
        List<String> out = new ArrayList<>();
        for (String s : v.split(",")) {
            if (!s.trim().isEmpty()) {
                out.add(s.trim());
            }
        }
        return out;
    }

    /**
     * Number of GPUs (see {@link org.tserve.dist.DeviceInventory}): {@code number_of_gpu}, capped
     * at what nvidia-smi detects when it detects any, else the detected count.
     */
    public int getNumberOfGpu() {
        String v = get("number_of_gpu");
        Integer configured = null;
        if (v != null && !v.trim().isEmpty()) {
            try {
                configured = Integer.parseInt(v.trim());
            } catch (NumberFormatException e) {
                throw new ConfigException("number_of_gpu must be an integer, got '" + v + "'");
            }
        }
        return org.tserve.dist.DeviceInventory.count(configured);
    }

    /** The parsed {@code models} block: name → version → settings (keys as in model-config.yaml). */
    public Map<String, Map<String, Map<String, Object>>> getModelsJson() {
        String models = get("models");
        if (models == null || models.isEmpty()) {
            return new LinkedHashMap<>();
        }
        return ModelsJson.parse(models);
    }

    /** True when the file read is the latest config snapshot (no --ts-config was given). */
    public boolean isFromSnapshot() {
        return fromSnapshot;
    }

    /** Whether config snapshots are written ({@code -ncs} turns them off). */
    public boolean isSnapshotsEnabled() {
        return snapshotsEnabled;
    }

    /** The parsed {@code model_snapshot} (the models to start with), or null when unset. */
    public ModelSnapshot getModelSnapshot() {
        String s = get("model_snapshot");
        return s == null || s.isEmpty() ? null : ModelSnapshot.parse(s);
    }

    /**
     * The keys set by the config file, the command line and the environment (defaults left out),
     * without {@code model_snapshot}: what a config snapshot repeats.
     */
    public Map<String, String> configured() {
        Map<String, String> out = new TreeMap<>(values);
        out.remove("model_snapshot");
        return out;
    }

    /** The whole effective configuration (for the startup dump). */
    public Map<String, String> effective() {
        Map<String, String> out = new TreeMap<>();
        for (ConfigKeys.Key k : ConfigKeys.all().values()) {
            String v = get(k.name);
            if (v != null) {
                out.put(k.name, v);
            }
        }
        return out;
    }
}
