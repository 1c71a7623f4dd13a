package org.tserve.wlm.supervision;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tserve.dist.TorchrunOptions;
import org.tserve.wlm.api.RankDescription;

/** Rank bookkeeping: pids from LOADED, states, elastic restarts within max-restarts. */
public class RankGroupTest {
    private static RankGroup group(String type, int level, int maxRestarts) {
        return new RankGroup(TorchrunOptions.parse("m", type, level, Map.of("max-restarts", maxRestarts)), null);
    }

    @Test
    public void aPlainWorkerHasOneSocketAndNoRanksToShow() {
        RankGroup g = group("", 0, 1);
        g.reset("STARTING");
        assertEquals(1, g.sockets());
        assertEquals(List.of(), g.describe());
        assertEquals(-1, g.noteLoaded(0, "{\"pid\": 42}"));
        assertFalse("a plain worker restarts whole", g.tryElasticRestart(0, true));
    }

    @Test
    public void torchrunRanksShowPidsAndStates() {
        RankGroup g = group("tp", 2, 1);
        g.reset("STARTING");
        assertEquals(2, g.sockets());
        assertEquals(77, g.noteLoaded(1, "{\"status\": 200, \"pid\": 77}"));
        assertEquals(-1, g.noteLoaded(0, "not json"));
        g.mark("READY");
        List<RankDescription> ranks = g.describe();
        assertEquals(2, ranks.size());
        assertEquals(new RankDescription(0, -1, "cpu", "READY"), ranks.get(0));
        assertEquals(new RankDescription(1, 77, "cpu", "READY"), ranks.get(1));
    }

    @Test
    public void elasticRestartsStopAtMaxRestartsAndResetWithANewAgent() {
        RankGroup g = group("pp", 2, 2);
        g.reset("STARTING");
        assertFalse("the frontend closed the link: no rank died", g.tryElasticRestart(-1, true));
        assertFalse("a dead agent restarts nothing", g.tryElasticRestart(1, false));
        assertTrue(g.tryElasticRestart(1, true));
        assertEquals("RESTARTING", g.describe().get(0).state());
        assertTrue(g.tryElasticRestart(0, true));
        assertEquals(2, g.elasticRestarts());
        assertFalse(g.tryElasticRestart(0, true));
        g.reset("STARTING");
        assertEquals(0, g.elasticRestarts());
        assertTrue(g.tryElasticRestart(0, true));
    }

    @Test
    public void aMemberNodeShowsGlobalRanksFromItsNodeRankUntilARankSaysOtherwise() {
        TorchrunOptions o = TorchrunOptions.parse("m", "tp", 2, Map.of("nnodes", 2, "rdzv-endpoint", "h:1"))
                .forNode(1, "10.0.0.2");
        assertEquals(2, o.firstRankOfNode());
        RankGroup g = new RankGroup(o, null);
        g.setNodeRank(1);
        g.reset("STARTING");
        assertEquals(List.of(2, 3), g.describe().stream().map(RankDescription::rank).toList());
        // an etcd rendezvous ordered this node first: its rank 0 says so in LOADED
        g.noteLoaded(0, "{\"status\": 200, \"pid\": 5, \"rank\": 0}");
        assertEquals(0, g.firstGlobalRank());
        assertEquals(List.of(0, 1), g.describe().stream().map(RankDescription::rank).toList());
    }
}
