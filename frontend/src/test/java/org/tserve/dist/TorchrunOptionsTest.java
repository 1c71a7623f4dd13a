package org.tserve.dist;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tserve.wlm.supervision.MemberClient;

public class TorchrunOptionsTest {
    private static Map<String, Object> block(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static String refusal(String type, int level, Map<String, Object> torchrun) {
        try {
            TorchrunOptions.parse("m", type, level, torchrun);
        } catch (IllegalArgumentException e) {
            return e.getMessage();
        }
        fail("expected " + type + "/" + level + "/" + torchrun + " to be refused");
        return null;
    }

    @Test
    public void buildsTheTorchrunCommandOfTheWorkersPython() {
        TorchrunOptions o = TorchrunOptions.parse("llama", "tp", 2, block("max-restarts", 2, "tee", "3"));
        assertTrue(o.usesTorchrun());
        assertTrue(o.broadcastsInference());
        List<String> cmd = o.command("/venv/bin/python", "llama_29500", "127.0.0.1:29500", "/logs/torchelastic",
                Arrays.asList("--sock-type", "unix", "--sock-name", "/tmp/s/.ts.sock.29500"));
        assertEquals(Arrays.asList("/venv/bin/python", "-m", "torch.distributed.run", "--nnodes", "1",
                "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29500",
                "--rdzv-id", "llama_29500", "--max-restarts", "2", "--log-dir", "/logs/torchelastic",
                "--tee", "3", "-m", "ts.model_service_worker", "--sock-type", "unix", "--sock-name",
                "/tmp/s/.ts.sock.29500"), cmd);
        List<String> plain = TorchrunOptions.parse("llama", "pp", 2, Collections.emptyMap())
                .command("py", "id", "127.0.0.1:1", "/l", Collections.emptyList());
        assertEquals("--tee 3 unless the yaml sets tee", "3", plain.get(plain.indexOf("--tee") + 1));
        assertEquals("TorchServe's default", "1", plain.get(plain.indexOf("--max-restarts") + 1));
        Map<String, String> env = o.environment(null);
        assertEquals("1", env.get("OMP_NUM_THREADS"));
        assertEquals("1", env.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE"));
        assertFalse(env.containsKey("CUDA_VISIBLE_DEVICES"));
    }

    @Test
    public void pipelineParallelSendsInferenceToRankZeroOnly() {
        TorchrunOptions pp = TorchrunOptions.parse("m", "pp", 0, block("nproc-per-node", 2));
        assertEquals(2, pp.parallelLevel);
        assertFalse(pp.broadcastsInference());
    }

    @Test
    public void customRunsWithoutTorchrunAndNoneIsNotDistributed() {
        assertFalse(TorchrunOptions.parse("m", "custom", 2, Collections.emptyMap()).usesTorchrun());
        TorchrunOptions none = TorchrunOptions.parse("m", "", 0, Collections.emptyMap());
        assertFalse(none.usesTorchrun());
    }

    @Test
    public void refusesInconsistentSettingsNamingBothValues() {
        String msg = refusal("tp", 2, block("nproc-per-node", 4));
        assertTrue(msg, msg.contains("torchrun.nproc-per-node (4) differs from parallelLevel (2)"));
        msg = refusal("pp", 1, Collections.emptyMap());
        assertTrue(msg, msg.contains("pp") && msg.contains("parallelLevel >= 2, got 1"));
        msg = refusal("tp", 0, Collections.emptyMap());
        assertTrue(msg, msg.contains("needs parallelLevel >= 1"));
        List<String> warnings = new java.util.ArrayList<>();
        TorchrunOptions plain = TorchrunOptions.parse("m", "", 2, Collections.emptyMap(), warnings);
        assertFalse("TorchServe runs parallelLevel without parallelType as a plain worker", plain.isParallel());
        assertTrue(warnings.toString(), warnings.get(0).contains("ignored without parallelType"));
        msg = refusal("xp", 2, Collections.emptyMap());
        assertTrue(msg, msg.contains("parallelType must be one of"));
    }

    @Test
    public void refusesUnknownAndIllTypedTorchrunKeys() {
        String msg = refusal("tp", 2, block("nproc_per_node", 2));
        assertTrue(msg, msg.contains("unknown torchrun option 'nproc_per_node'"));
        msg = refusal("tp", 2, block("max-restarts", "many"));
        assertTrue(msg, msg.contains("torchrun.max-restarts must be an integer, got 'many'"));
        msg = refusal("tp", 2, block("rdzv-backend", "zookeeper"));
        assertTrue(msg, msg.contains("rdzv-backend"));
        msg = refusal("tp", 2, block("nnodes", 2));
        assertTrue(msg, msg.contains("needs torchrun.rdzv-endpoint"));
        msg = refusal("tp", 2, block("nnodes", 2, "rdzv-endpoint", "10.0.0.1:29400", "node-rank", 2));
        assertTrue(msg, msg.contains("node-rank (2) must be below nnodes (2)"));
        msg = refusal("tp", 2, block("redirects", "yes"));
        assertTrue(msg, msg.contains("torchrun.redirects"));
    }

    @Test
    public void anExplicitEndpointWinsOverTheServersPort() {
        TorchrunOptions o = TorchrunOptions.parse("tp", "tp", 2,
                block("nnodes", 2, "rdzv-endpoint", "10.0.0.1:29400", "node-rank", 1, "OMP_NUMBER_THREADS", 4));
        List<String> cmd = o.command("python", "id", "127.0.0.1:1", "/l", Collections.emptyList());
        assertEquals("10.0.0.1:29400", cmd.get(cmd.indexOf("--rdzv-endpoint") + 1));
        assertEquals("1", cmd.get(cmd.indexOf("--node-rank") + 1));
        assertEquals("4", o.environment(null).get("OMP_NUM_THREADS"));
    }

    @Test
    public void portBlocksNeverOverlapAndSkipBusyPorts() throws Exception {
        try (java.net.ServerSocket busy = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            int port = busy.getLocalPort();
            PortBlockAllocator ports = new PortBlockAllocator(port);
            int a = ports.take(2);
            int b = ports.take(2);
            assertNotEquals("a port something listens on is skipped", port, a);
            assertTrue(a + 2 <= b || b + 2 <= a);
            ports.release(a, 2);
            assertTrue(ports.take(2) >= port);
        }
    }

    @Test
    public void eachNodeOfAJobAcrossMachinesGetsItsRankAddressAndNoElasticRestarts() {
        TorchrunOptions o = TorchrunOptions.parse("m", "tp", 1, block("nnodes", 2, "rdzv-endpoint", "10.0.0.1:29400",
                "max-restarts", 3, "rdzv-conf", "timeout=60,is_host=0"));
        TorchrunOptions leader = o.forNode(0, "10.0.0.1");
        List<String> cmd = leader.command("py", "job", "unused:1", "/logs", List.of());
        String line = String.join(" ", cmd);
        assertTrue(line, line.contains("--node-rank 0") && line.contains("--local-addr 10.0.0.1"));
        assertTrue(line, line.contains("--rdzv-conf timeout=60,is_host=1") && line.contains("--max-restarts 0"));
        assertTrue(line, line.contains("--rdzv-endpoint 10.0.0.1:29400"));
        String member = String.join(" ", o.forNode(1, null).command("py", "job", "x:1", "/logs", List.of()));
        assertTrue(member, member.contains("--node-rank 1") && member.contains("is_host=0") && !member.contains("--local-addr"));
        TorchrunOptions stat = TorchrunOptions.parse("m", "tp", 1, block("nnodes", 2, "rdzv-backend", "static",
                "rdzv-endpoint", "10.0.0.1:29400"));
        assertFalse(String.join(" ", stat.forNode(1, "10.0.0.2").command("py", "j", "x:1", "/l", List.of()))
                .contains("is_host"));
        // what the leader sends a member parses back to the same options
        Map<String, Object> sent = o.forNode(0, "10.0.0.1").toMap();
        assertFalse(sent.containsKey("node-rank") || sent.containsKey("local-addr"));
        TorchrunOptions back = TorchrunOptions.parse("m", "tp", 1, o.toMap());
        assertEquals(o.nnodes, back.nnodes);
        assertEquals(o.rdzvEndpoint, back.rdzvEndpoint);
        assertEquals(3, back.maxRestarts);
        assertEquals("timeout=60,is_host=0", back.passThrough.get("rdzv-conf"));
    }

    @Test
    public void membersAreListedInNodeRankOrder() {
        List<MemberClient> m = MemberClient.parse("10.0.0.2:8081, http://10.0.0.3:8081 10.0.0.4:9", null);
        assertEquals(Arrays.asList("10.0.0.2:8081", "http://10.0.0.3:8081", "10.0.0.4:9"),
                m.stream().map(c -> c.address).toList());
        assertTrue(MemberClient.parse("", null).isEmpty());
    }

    @Test
    public void anElasticJobTakesMinToMaxNodesAndKeepsItsRestartsWithEtcd() {
        TorchrunOptions o = TorchrunOptions.parse("m", "tp", 1, block("nnodes", "1:3", "rdzv-backend", "etcd-v2",
                "rdzv-endpoint", "10.0.0.1:2379", "max-restarts", 4));
        assertEquals(1, o.nnodesMin);
        assertEquals(3, o.nnodes);
        assertTrue(o.dynamicRendezvous());
        String line = String.join(" ", o.forNode(1, "10.0.0.2").command("py", "j", "x:1", "/l", List.of()));
        assertTrue(line, line.contains("--nnodes 1:3") && line.contains("--max-restarts 4"));
        assertEquals("1:3", o.toMap().get("nnodes"));
        assertEquals(3, TorchrunOptions.parse("m", "tp", 1, o.toMap()).nnodes);
        assertTrue(refusal("tp", 1, block("nnodes", "3:2", "rdzv-endpoint", "h:1")).contains("MIN must not exceed MAX"));
        assertTrue(refusal("tp", 1, block("nnodes", "a:2", "rdzv-endpoint", "h:1")).contains("torchrun.nnodes"));
        assertFalse(TorchrunOptions.parse("m", "tp", 1, block("nnodes", 2, "rdzv-endpoint", "h:1")).dynamicRendezvous());
    }
}
