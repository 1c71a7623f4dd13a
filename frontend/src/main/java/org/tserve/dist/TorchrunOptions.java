package org.tserve.dist;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The validated {@code parallelType}/{@code parallelLevel}/{@code torchrun} settings of a
 * model. Every inconsistency is refused at registration with a message naming the values.
 */
public final class TorchrunOptions {
    public static final Set<String> PARALLEL_TYPES = Collections.unmodifiableSet(
            new LinkedHashSet<>(Arrays.asList("pp", "tp", "pptp", "custom")));
    /** torchrun keys a model-config.yaml may set; each becomes the torchrun option of that name. */
    public static final Set<String> KEYS = Collections.unmodifiableSet(new LinkedHashSet<>(Arrays.asList(
            "nnodes", "nproc-per-node", "max-restarts", "rdzv-backend", "rdzv-endpoint", "rdzv-conf",
            "node-rank", "master-addr", "master-port", "log-dir", "redirects", "tee", "monitor-interval",
            "local-addr", "OMP_NUMBER_THREADS", "omp-num-threads")));
    private static final Pattern STD_STREAMS = Pattern.compile("[0-3]|\\d+:[0-3](,\\d+:[0-3])*");
    private static final Pattern HOST_PORT = Pattern.compile("[A-Za-z0-9_.\\-\\[\\]:]+:\\d{1,5}");

    public final String parallelType;
    public final int parallelLevel;
    /** Nodes of one job: the most (an elastic job {@code MIN:MAX} forms with {@link #nnodesMin}). */
    public final int nnodes;
    /** The fewest nodes an elastic job ({@code nnodes: MIN:MAX}) runs with; = nnodes otherwise. */
    public final int nnodesMin;
    public final int maxRestarts;
    public final int ompThreads;
    public final String rdzvBackend;
    /** null = the server picks 127.0.0.1:&lt;a free port from initial_distribution_port&gt;. */
    public final String rdzvEndpoint;
    /** Options passed through as given (rdzv-conf, node-rank, master-addr/port, log-dir, redirects, tee, ...). */
    public final Map<String, String> passThrough;

    private TorchrunOptions(String parallelType, int parallelLevel, int nnodesMin, int nnodes, int maxRestarts,
                            int ompThreads, String rdzvBackend, String rdzvEndpoint, Map<String, String> passThrough) {
        this.parallelType = parallelType;
        this.parallelLevel = parallelLevel;
        this.nnodesMin = nnodesMin;
        this.nnodes = nnodes;
        this.maxRestarts = maxRestarts;
        this.ompThreads = ompThreads;
        this.rdzvBackend = rdzvBackend;
        this.rdzvEndpoint = rdzvEndpoint;
        this.passThrough = Collections.unmodifiableMap(passThrough);
    }

    /** True when the model's worker is a torchrun job (custom handlers run as one plain process). */
    public boolean usesTorchrun() {
        return !parallelType.isEmpty() && !parallelType.equals("custom");
    }

    /** Inference goes to rank 0 only for pipeline parallel; to every rank otherwise. */
    public boolean broadcastsInference() {
        return !parallelType.equals("pp");
    }

    /** True for pp, tp, pptp and custom: the worker holds {@code parallelLevel} devices of its own. */
    public boolean isParallel() {
        return !parallelType.isEmpty();
    }

    /**
     * The global rank of this node's local rank 0 as the node rank gives it ({@code node-rank} x
     * ranks per node); 0 on one machine. An etcd rendezvous may order nodes otherwise: the ranks'
     * LOADED answers then say their real global rank.
     */
    public int firstRankOfNode() {
        String n = passThrough.get("node-rank");
        return n == null ? 0 : Integer.parseInt(n) * ranks();
    }

    /** Processes (and frontend connections) of one worker: the local ranks of a torchrun job, else 1. */
    public int ranks() {
        return usesTorchrun() ? parallelLevel : 1;
    }

    /**
     * Validates the model's distributed settings.
     *
     * @param model        the model name, for messages
     * @param parallelType "" (none), pp, tp, pptp or custom
     * @param parallelLevel ranks per worker (0 = not set)
     * @param torchrun     the model-config.yaml torchrun block (may be empty)
     */
    public static TorchrunOptions parse(String model, String parallelType, int parallelLevel, Map<String, Object> torchrun)
            throws IllegalArgumentException {
        return parse(model, parallelType, parallelLevel, torchrun, new java.util.ArrayList<>());
    }

    /**
     * As {@link #parse(String, String, int, Map)}; settings TorchServe accepts but ignores (a
     * parallelLevel or torchrun block without parallelType: a plain worker) add a line to
     * {@code warnings} instead of being refused.
     */
    public static TorchrunOptions parse(String model, String parallelType, int parallelLevel, Map<String, Object> torchrun,
                                        List<String> warnings) throws IllegalArgumentException {
        String type = parallelType == null ? "" : parallelType.trim();
        Map<String, Object> block = torchrun == null ? Collections.emptyMap() : torchrun;
        String where = "model " + model + ": ";
        if (!type.isEmpty() && !PARALLEL_TYPES.contains(type)) {
            throw new IllegalArgumentException(where + "parallelType must be one of " + PARALLEL_TYPES + ", got '" + type + "'");
        }
        for (String key : block.keySet()) {
            if (!KEYS.contains(key)) {
                throw new IllegalArgumentException(where + "unknown torchrun option '" + key + "' in model-config.yaml; known: " + KEYS);
            }
        }
        int level = parallelLevel;
        if (block.containsKey("nproc-per-node")) {
            int nproc = intOf(where, "torchrun.nproc-per-node", block.get("nproc-per-node"), 1);
            if (level > 0 && level != nproc) {
                throw new IllegalArgumentException(where + "torchrun.nproc-per-node (" + nproc + ") differs from parallelLevel ("
                        + level + "); set them equal or drop one");
            }
            level = nproc;
        }
        if (type.isEmpty()) {
            if (level > 1 || !block.isEmpty()) {
                // TorchServe runs such a model as one plain worker; so do we, but say so.
                warnings.add("parallelLevel " + level + (block.isEmpty() ? "" : " and the torchrun block")
                        + " are ignored without parallelType (pp, tp, pptp or custom): the model runs in one plain worker");
            }
            return new TorchrunOptions("", Math.max(level, 0), 1, 1, 0, 1, "c10d", null, new LinkedHashMap<>());
        }
        if (level < 1) {
            throw new IllegalArgumentException(where + "parallelType " + type + " needs parallelLevel >= 1 (ranks per worker), got " + level);
        }
        Object nn = block.getOrDefault("nnodes", 1);
        int nnodesMin;
        int nnodes;
        if (nn instanceof String && ((String) nn).contains(":")) {
            String[] mm = ((String) nn).split(":", 2);
            nnodesMin = intOf(where, "torchrun.nnodes (MIN of MIN:MAX)", mm[0], 1);
            nnodes = intOf(where, "torchrun.nnodes (MAX of MIN:MAX)", mm[1], 1);
            if (nnodesMin > nnodes) {
                throw new IllegalArgumentException(where + "torchrun.nnodes " + nn + ": MIN must not exceed MAX");
            }
        } else {
            nnodes = intOf(where, "torchrun.nnodes", nn, 1);
            nnodesMin = nnodes;
        }
        if (type.equals("pp") && level * nnodesMin < 2) {
            // a stage per rank: two ranks on this machine, or one on each of two machines
            throw new IllegalArgumentException(where + "parallelType pp splits the model into stages and needs parallelLevel >= 2, got "
                    + level + " (or torchrun.nnodes >= 2 across machines)");
        }
        int maxRestarts = intOf(where, "torchrun.max-restarts", block.getOrDefault("max-restarts", 1), 0);
        Object omp = block.containsKey("omp-num-threads") ? block.get("omp-num-threads") : block.getOrDefault("OMP_NUMBER_THREADS", 1);
        int ompThreads = intOf(where, "torchrun.omp-num-threads", omp, 1);
        String backend = String.valueOf(block.getOrDefault("rdzv-backend", "c10d"));
        if (!Arrays.asList("c10d", "static", "etcd", "etcd-v2").contains(backend)) {
            throw new IllegalArgumentException(where + "torchrun.rdzv-backend must be c10d, static, etcd or etcd-v2, got '" + backend + "'");
        }
        String endpoint = block.containsKey("rdzv-endpoint") ? String.valueOf(block.get("rdzv-endpoint")) : null;
        if (endpoint != null && !HOST_PORT.matcher(endpoint).matches()) {
            throw new IllegalArgumentException(where + "torchrun.rdzv-endpoint must be HOST:PORT, got '" + endpoint + "'");
        }
        if (nnodes > 1 && endpoint == null) {
            throw new IllegalArgumentException(where + "torchrun.nnodes is " + nnodes
                    + ": a job across machines needs torchrun.rdzv-endpoint (HOST:PORT every node can reach)");
        }
        Map<String, String> pass = new LinkedHashMap<>();
        for (String key : Arrays.asList("rdzv-conf", "node-rank", "master-addr", "master-port", "log-dir",
                "redirects", "tee", "monitor-interval", "local-addr")) {
            if (block.containsKey(key)) {
                pass.put(key, String.valueOf(block.get(key)));
            }
        }
        if (pass.containsKey("node-rank")) {
            int rank = intOf(where, "torchrun.node-rank", pass.get("node-rank"), 0);
            if (rank >= nnodes) {
                throw new IllegalArgumentException(where + "torchrun.node-rank (" + rank + ") must be below nnodes (" + nnodes + ")");
            }
        }
        for (String key : Arrays.asList("redirects", "tee")) {
            if (pass.containsKey(key) && !STD_STREAMS.matcher(pass.get(key)).matches()) {
                throw new IllegalArgumentException(where + "torchrun." + key + " must be 0-3 or RANK:N,... (torchrun's syntax), got '"
                        + pass.get(key) + "'");
            }
        }
        if (pass.containsKey("master-port")) {
            intOf(where, "torchrun.master-port", pass.get("master-port"), 1);
        }
        return new TorchrunOptions(type, level, nnodesMin, nnodes, maxRestarts, ompThreads, backend, endpoint, pass);
    }

    /** {@code MIN:MAX} for an elastic job, else the node count: torchrun's {@code --nnodes}. */
    public String nnodesText() {
        return nnodesMin == nnodes ? String.valueOf(nnodes) : nnodesMin + ":" + nnodes;
    }

    /**
     * Dynamic mode: the rendezvous is an etcd server, and the job forms and re-forms (elastic)
     * with the nodes that are there; node ranks come from the rendezvous, not from the leader.
     */
    public boolean dynamicRendezvous() {
        return rdzvBackend.equals("etcd") || rdzvBackend.equals("etcd-v2");
    }

    private static int intOf(String where, String key, Object value, int min) {
        int n;
        try {
            n = value instanceof Number ? ((Number) value).intValue() : Integer.parseInt(String.valueOf(value).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(where + key + " must be an integer, got '" + value + "'");
        }
        if (n < min) {
            throw new IllegalArgumentException(where + key + " must be >= " + min + ", got " + n);
        }
        return n;
    }

    /**
     * The torchrun command of one worker: {@code <python> -m torch.distributed.run <options>
     * -m ts.model_service_worker <workerArgs>} (the torchrun of the worker's own Python).
     */
    public List<String> command(String python, String runId, String endpoint, String logDir, List<String> workerArgs) {
        List<String> cmd = new java.util.ArrayList<>(Arrays.asList(python, "-m", "torch.distributed.run",
                "--nnodes", nnodesText(), "--nproc-per-node", String.valueOf(parallelLevel),
                "--rdzv-backend", rdzvBackend, "--rdzv-endpoint", rdzvEndpoint != null ? rdzvEndpoint : endpoint,
                "--rdzv-id", runId, "--max-restarts", String.valueOf(maxRestarts),
                "--log-dir", passThrough.getOrDefault("log-dir", logDir)));
        passThrough.forEach((key, value) -> {
            if (!key.equals("log-dir")) {
                cmd.add("--" + key);
                cmd.add(value);
            }
        });
        if (!passThrough.containsKey("tee")) {
            // every rank's output also on the agent's console, prefixed [default<rank>]:, so
            // the frontend can copy it into the model log with the rank named
            cmd.addAll(Arrays.asList("--tee", "3"));
        }
        cmd.addAll(Arrays.asList("-m", "ts.model_service_worker"));
        cmd.addAll(workerArgs);
        return cmd;
    }

    /**
     * The options of one node of a job that spans machines under a leader: {@code node-rank},
     * {@code local-addr} (when given) and, for c10d, {@code rdzv-conf is_host} (the leader's agent
     * hosts the rendezvous store); max-restarts 0, as the leader restarts the whole job itself,
     * except with an etcd rendezvous, where torchrun re-forms the job (dynamic mode).
     */
    public TorchrunOptions forNode(int nodeRank, String localAddr) {
        Map<String, String> pass = new LinkedHashMap<>(passThrough);
        pass.put("node-rank", String.valueOf(nodeRank));
        if (localAddr != null && !localAddr.isEmpty()) {
            pass.put("local-addr", localAddr);
        }
        if (rdzvBackend.equals("c10d")) {
            String conf = pass.getOrDefault("rdzv-conf", "");
            conf = conf.replaceAll("(^|,)is_host=[^,]*", "").replaceFirst("^,", "");
            pass.put("rdzv-conf", (conf.isEmpty() ? "" : conf + ",") + "is_host=" + (nodeRank == 0 ? 1 : 0));
        }
        return new TorchrunOptions(parallelType, parallelLevel, nnodesMin, nnodes, dynamicRendezvous() ? maxRestarts : 0,
                ompThreads, rdzvBackend, rdzvEndpoint, pass);
    }

    /** The torchrun block these options were parsed from (to send to another node). */
    public Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("nnodes", nnodesMin == nnodes ? (Object) nnodes : nnodesText());
        m.put("nproc-per-node", parallelLevel);
        m.put("max-restarts", maxRestarts);
        m.put("omp-num-threads", ompThreads);
        m.put("rdzv-backend", rdzvBackend);
        if (rdzvEndpoint != null) {
            m.put("rdzv-endpoint", rdzvEndpoint);
        }
        passThrough.forEach((k, v) -> {
            if (!k.equals("node-rank") && !k.equals("local-addr")) {
                m.put(k, v);
            }
        });
        return m;
    }

    /** Environment every rank needs besides the server's own. */
    public Map<String, String> environment(DeviceReservation devices) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("OMP_NUM_THREADS", String.valueOf(ompThreads));
        // A fresh rendezvous store per restart attempt: without it gloo often fails to
        // re-initialise after an elastic restart (see docs/large_models.md).
        env.put("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1");
        env.put("LOGLEVEL", "INFO");
        if (devices != null) {
            env.put("CUDA_VISIBLE_DEVICES", devices.cudaVisibleDevices());
        }
        return env;
    }
}
