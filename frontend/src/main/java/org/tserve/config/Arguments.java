package org.tserve.config;

import java.util.ArrayList;
import java.util.List;

/** The Java server's command line, as TorchServe's {@code ModelServer} takes it. */
public final class Arguments {
    public String configFile;
    public String python;
    public final List<String> models = new ArrayList<>();
    public String modelStore;
    public boolean noConfigSnapshot;
    public boolean disableTokenAuth;
    public boolean enableModelApi;
    public String workflowStore;
    public String cppLogConfig;
    /** {@code --member-of}: the leader's management address (config key cluster_leader). */
    public String memberOf;
    /** {@code --zygote PID:SOCKET}: a zygote the launcher started for this server (ts/warmstart/spawn.py). */
    public String zygote;

    /** Parses the arguments; an unknown option or a missing value throws a ConfigException. */
    public static Arguments parse(String[] args) {
        Arguments a = new Arguments();
        for (int i = 0; i < args.length; i++) {
            String opt = args[i];
            switch (opt) {
                case "-f":
                case "--ts-config-file":
                    a.configFile = value(args, ++i, opt);
                    break;
                case "-e":
                case "--python":
                    a.python = value(args, ++i, opt);
                    break;
                case "-m":
                case "--models":
                    a.models.add(value(args, ++i, opt));
                    // TorchServe's launcher passes several models after one -m
                    while (i + 1 < args.length && !args[i + 1].startsWith("-")) {
                        a.models.add(args[++i]);
                    }
                    break;
                case "-s":
                case "--model-store":
                    a.modelStore = value(args, ++i, opt);
                    break;
                case "-w":
                case "--workflow-store":
                    a.workflowStore = value(args, ++i, opt);
                    break;
                case "-clog":
                case "--cpp-log-config":
                    a.cppLogConfig = value(args, ++i, opt);
                    break;
                case "-ncs":
                case "--no-config-snapshot":
                case "--no-config-snapshots":
                    a.noConfigSnapshot = true;
                    break;
                case "-dt":
                case "--disable-token-auth":
                    a.disableTokenAuth = true;
                    break;
                case "-mapi":
                case "--enable-model-api":
                    a.enableModelApi = true;
                    break;
                case "--member-of":
                    a.memberOf = value(args, ++i, opt);
                    break;
                case "--zygote":
                    a.zygote = value(args, ++i, opt);
                    break;
                default:
                    throw new ConfigException("Unknown option " + opt + "; valid options: -f/--ts-config-file, "
                            + "--python, -m/--models, -s/--model-store, -w/--workflow-store, -ncs, -dt/--disable-token-auth, "
                            + "-mapi/--enable-model-api, --member-of, --zygote");
            }
        }
        return a;
    }

    private static String value(String[] args, int i, String opt) {
        if (i >= args.length || args[i].isEmpty()) {
            throw new ConfigException("Option " + opt + " needs a value");
        }
        return args[i];
    }
}
