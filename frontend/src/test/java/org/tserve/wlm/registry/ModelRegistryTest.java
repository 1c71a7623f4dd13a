package org.tserve.wlm.registry;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.tserve.wlm.TestModels.model;

import java.util.List;
import org.junit.Test;
import org.tserve.wlm.api.WlmException;

/** The version rules: first version is the default, the default is not removed from under others, rollback. */
public class ModelRegistryTest {
    private final ModelRegistry registry = new ModelRegistry();

    private static WlmException refused(ThrowingCall call) {
        try {
            call.run();
        } catch (WlmException e) {
            return e;
        }
        fail("expected a WlmException");
        return null;
    }

    private interface ThrowingCall {
        void run() throws WlmException;
    }

    @Test
    public void theFirstVersionIsTheDefaultAndALaterOneDoesNotTakeOver() throws Exception {
        Model v1 = model("m", "1.0");
        registry.add(v1);
        registry.add(model("m", "2.0"));
        assertSame(v1, registry.find("m", null));
        assertEquals("2.0", registry.find("m", "2.0").version);
        assertEquals("1.0", registry.select("m", "2.0").defaultVersion());
    }

    @Test
    public void aVersionRegisteredTwiceIs409AndTheFirstStays() throws Exception {
        Model first = model("m", "1.0");
        registry.add(first);
        WlmException e = refused(() -> registry.add(model("m", "1.0")));
        assertEquals(409, e.getStatus());
        assertEquals("Model version 1.0 is already registered for model m", e.getMessage());
        assertSame(first, registry.find("m", "1.0"));
    }

    @Test
    public void unknownNamesAndVersionsAre404() throws Exception {
        registry.add(model("m", "1.0"));
        WlmException name = refused(() -> registry.find("x", null));
        assertEquals(404, name.getStatus());
        assertEquals("Model not found: x", name.getMessage());
        WlmException version = refused(() -> registry.find("m", "9"));
        assertEquals(404, version.getStatus());
        assertEquals("Model version: 9 does not exist for model: m", version.getMessage());
        assertEquals(404, refused(() -> registry.setDefault("m", "9")).getStatus());
        assertEquals(404, refused(() -> registry.remove("m", "9")).getStatus());
        assertEquals(404, refused(() -> registry.select("x", "all")).getStatus());
    }

    @Test
    public void theDefaultIsRemovedOnlyOnceItIsTheLastVersion() throws Exception {
        registry.add(model("m", "1.0"));
        registry.add(model("m", "2.0"));
        assertEquals(403, refused(() -> registry.remove("m", null)).getStatus());
        assertEquals(403, refused(() -> registry.remove("m", "1.0")).getStatus());
        assertEquals("2.0", registry.remove("m", "2.0").version);
        assertEquals("1.0", registry.remove("m", null).version);
        assertTrue("the name goes with its last version", registry.names().isEmpty());
        assertEquals(404, refused(() -> registry.find("m", null)).getStatus());
    }

    @Test
    public void setDefaultMovesTheDefaultAndFreesTheOldOneForRemoval() throws Exception {
        registry.add(model("m", "1.0"));
        registry.add(model("m", "2.0"));
        registry.setDefault("m", "2.0");
        assertEquals("2.0", registry.find("m", null).version);
        assertEquals("1.0", registry.remove("m", "1.0").version);
        assertEquals(List.of("2.0"), versions(registry.select("m", "all").models()));
    }

    @Test
    public void aDiscardedDefaultPassesToTheOldestRemainingVersion() throws Exception {
        registry.add(model("m", "1.0"));
        registry.add(model("m", "2.0"));
        Model v3 = model("m", "3.0");
        registry.add(v3);
        registry.setDefault("m", "3.0");
        registry.discard(v3);
        assertEquals("1.0", registry.find("m", null).version);
        assertEquals(List.of("1.0", "2.0"), versions(registry.select("m", "all").models()));
    }

    @Test
    public void discardLeavesAnotherInstanceOfTheSameVersionAlone() throws Exception {
        Model registered = model("m", "1.0");
        registry.add(registered);
        registry.discard(model("m", "1.0"));   // e.g. the one refused with 409
        assertSame(registered, registry.find("m", "1.0"));
        registry.discard(registered);
        assertTrue(registry.names().isEmpty());
    }

    @Test
    public void selectAllNamesAndDefaultsAndRemoveAll() throws Exception {
        registry.add(model("b", "1.0"));
        registry.add(model("a", "2.0"));
        registry.add(model("a", "1.0"));
        ModelRegistry.Selection all = registry.select("a", "all");
        assertEquals("registration order", List.of("2.0", "1.0"), versions(all.models()));
        assertEquals("2.0", all.defaultVersion());
        assertEquals(List.of("a", "b"), registry.names());
        assertEquals(2, registry.defaults().size());
        assertEquals(3, registry.removeAll().size());
        assertTrue(registry.names().isEmpty());
        assertTrue(registry.defaults().isEmpty());
    }

    private static List<String> versions(List<Model> ms) {
        return ms.stream().map(m -> m.version).toList();
    }
}
