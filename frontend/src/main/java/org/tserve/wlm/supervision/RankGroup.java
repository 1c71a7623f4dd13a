package org.tserve.wlm.supervision;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.tserve.dist.DeviceReservation;
import org.tserve.dist.TorchrunOptions;
import org.tserve.wlm.api.RankDescription;

/**
 * The ranks of one worker and what describe shows of them: pid (from each rank's LOADED answer),
 * device, state; and the elastic restarts torch.distributed.elastic made in the current agent's
 * lifetime. A plain worker has one socket and no ranks to show. This is the local group (every
 * rank on this machine); a group whose ranks live on other machines replaces it.
 */
public class RankGroup {
    private final TorchrunOptions dist;
    /** Devices reserved for the worker (held until it stops for good), or null. */
    private final DeviceReservation devices;
    private volatile long[] pids = new long[0];
    private volatile String[] states = new String[0];
    private volatile int elasticRestarts;
    /** Global rank of local rank 0: nodeRank x ranks per node on a node of a job across machines. */
    private volatile int rankOffset;
    /** The global rank local rank 0 reported in its LOADED answer (-1: not said). */
    private volatile int firstGlobalRank = -1;

    RankGroup(TorchrunOptions dist, DeviceReservation devices) {
        this.dist = dist;
        this.devices = devices;
    }

    /** Node {@code nodeRank} of a job across machines: describe shows global ranks. */
    public void setNodeRank(int nodeRank) {
        rankOffset = nodeRank * dist.ranks();
    }

    /** How many sockets the frontend opens: one per rank (one for a plain worker). */
    int sockets() {
        return dist.ranks();
    }

    /** A new agent: every rank in {@code state}, pids unknown, no elastic restart yet. */
    void reset(String state) {
        int n = dist.isParallel() ? dist.ranks() : 0;
        long[] p = new long[n];
        String[] s = new String[n];
        Arrays.fill(p, -1);
        Arrays.fill(s, state);
        pids = p;
        states = s;
        elasticRestarts = 0;
    }

    void mark(String state) {
        String[] s = states.clone();
        Arrays.fill(s, state);
        states = s;
    }

    /**
     * Records a rank's pid from its LOADED answer; returns it (-1 when the answer has none) so the
     * caller can read that rank's environment (DeepSpeed's shm names).
     */
    long noteLoaded(int rank, String loadedJson) {
        if (!dist.isParallel()) {
            return -1;
        }
        try {
            JsonObject r = JsonParser.parseString(loadedJson).getAsJsonObject();
            if (rank == 0 && r.has("rank")) {
                firstGlobalRank = r.get("rank").getAsInt();
            }
            if (r.has("pid") && rank < pids.length) {
                long pid = r.get("pid").getAsLong();
                long[] p = pids.clone();
                p[rank] = pid;
                pids = p;
                return pid;
            }
        } catch (RuntimeException ignored) {
            // an old worker without pid: describe shows -1
        }
        return -1;
    }

    /**
     * After rank {@code deadRank} closed its socket: true when torchrun restarts the ranks in the
     * same agent (a torchrun worker, the agent alive, restarts left), counting the restart and
     * marking the ranks RESTARTING; false when the whole worker must restart.
     */
    boolean tryElasticRestart(int deadRank, boolean agentAlive) {
        if (!dist.usesTorchrun() || deadRank < 0 || elasticRestarts >= dist.maxRestarts || !agentAlive) {
            return false;
        }
        elasticRestarts++;
        mark("RESTARTING");
        return true;
    }

    /** The global rank of local rank 0 as its LOADED answer said (-1 when it did not). */
    public int firstGlobalRank() {
        return firstGlobalRank;
    }

    /** The pids of this node's ranks that answered LOAD. */
    public long[] loadedPids() {
        return java.util.Arrays.stream(pids).filter(p -> p > 0).toArray();
    }

    /**
     * An elastic job re-forms (dynamic mode: a node left or joined): counted and shown as
     * RESTARTING; torchrun itself enforces max-restarts (re-forms for a joining node are free).
     */
    void reform() {
        elasticRestarts++;
        mark("RESTARTING");
    }

    int elasticRestarts() {
        return elasticRestarts;
    }

    int maxRestarts() {
        return dist.maxRestarts;
    }

    /** The ranks for describe (empty for a plain worker). */
    public List<RankDescription> describe() {
        if (!dist.isParallel()) {
            return List.of();
        }
        long[] p = pids;
        String[] s = states;
        List<RankDescription> out = new ArrayList<>(p.length);
        for (int r = 0; r < p.length; r++) {
            // the global rank local rank 0 reported wins (an etcd rendezvous orders nodes itself)
            int first = firstGlobalRank >= 0 ? firstGlobalRank : rankOffset;
            out.add(new RankDescription(first + r, p[r], devicesOf(r), s[r]));
        }
        return out;
    }

    /** Local rank r sees CUDA device r of the worker's CUDA_VISIBLE_DEVICES (custom: all of them). */
    private String devicesOf(int rank) {
        if (devices == null) {
            return "cpu";
        }
        if (!dist.usesTorchrun()) {
            return devices.cudaVisibleDevices();
        }
        List<Integer> ids = devices.deviceIds();
        return rank < ids.size() ? String.valueOf(ids.get(rank)) : "cpu";
    }
}
