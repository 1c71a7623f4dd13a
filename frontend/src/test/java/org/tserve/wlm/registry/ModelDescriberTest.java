package org.tserve.wlm.registry;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.nio.file.Path;
import java.util.List;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.TestModels;
import org.tserve.wlm.api.ModelDescription;
import org.tserve.wlm.api.ModelList;
import org.tserve.wlm.api.WlmException;

/** Describe and list over a registry of versions without workers. */
public class ModelDescriberTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private final ModelRegistry registry = new ModelRegistry();
    private final ModelDescriber describer = new ModelDescriber(registry);

    private Model add(String name, String version) throws Exception {
        Path dir = tmp.getRoot().toPath();
        String folder = name + "-" + version;
        Model m = TestModels.model(name, version, new ModelSettings(),
                TestModels.archive(dir, folder, "{\"model\": {\"handler\": \"h.py\"}}", folder + ".mar"));
        registry.add(m);
        return m;
    }

    private static List<String> names(ModelList page) {
        return page.models().stream().map(ModelList.Entry::modelName).toList();
    }

    @Test
    public void listShowsEachNamesDefaultSortedAndPaged() throws Exception {
        add("c", "1.0");
        add("a", "1.0");
        add("b", "1.0");
        add("b", "2.0");
        registry.setDefault("b", "2.0");
        ModelList first = describer.list(2, 0);
        assertEquals(List.of("a", "b"), names(first));
        assertEquals("b-2.0.mar", first.models().get(1).modelUrl());
        assertEquals("2", first.nextPageToken());
        ModelList last = describer.list(2, 2);
        assertEquals(List.of("c"), names(last));
        assertNull(last.nextPageToken());
        assertEquals("limit out of range: 100", List.of("a", "b", "c"), names(describer.list(-1, -4)));
        assertEquals(List.of("a", "b", "c"), names(describer.list(101, 0)));
        assertTrue(describer.list(2, 7).models().isEmpty());
    }

    @Test
    public void describeSelectsVersionsAndMarksTheDefault() throws Exception {
        add("m", "1.0");
        add("m", "2.0");
        List<ModelDescription> all = describer.describe("m", "all");
        assertEquals(2, all.size());
        assertTrue(all.get(0).isDefault());
        assertFalse(all.get(1).isDefault());
        ModelDescription d = describer.describe("m", null).get(0);
        assertEquals("1.0", d.modelVersion());
        assertEquals("m-1.0.mar", d.modelUrl());
        assertEquals(100, d.queueRemainingCapacity());
        assertEquals(0, d.queuePending());
        assertTrue(d.workers().isEmpty());
        try {
            describer.describe("m", "3.0");
            fail("no version 3.0");
        } catch (WlmException e) {
            assertEquals(404, e.getStatus());
        }
    }

    @Test
    public void describeHandsOutACopyOfTheSettings() throws Exception {
        Model m = add("m", "1.0");
        describer.describe("m", null).get(0).settings().minWorkers = 99;
        assertEquals(0, m.getSettings().minWorkers);
    }
}
