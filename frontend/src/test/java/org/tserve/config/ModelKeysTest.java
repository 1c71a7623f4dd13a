package org.tserve.config;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.Test;
import org.tserve.config.ModelKey.Shown;

/**
 * Adding a model setting is one declaration in ModelKeys: every declared key, set to a value other
 * than its default, survives apply → copy → describe (copy() once forgot keys, so a scale reset them).
 */
public class ModelKeysTest {
    /** A valid value other than the key's default, derived from its type. */
    private static Object sample(ModelKey<?> k) {
        Object d = k.defaultValue;
        if (d instanceof Integer) {
            return (Integer) d + 3;
        }
        if (d instanceof Boolean) {
            return !(Boolean) d;
        }
        if (d instanceof String) {
            return k.value.choices.stream().filter(c -> !c.equals(d)).findFirst().orElseThrow();
        }
        if (d instanceof List) {
            return List.of(0, 1);
        }
        if (d instanceof Map) {
            return Map.of("nnodes", 1);
        }
        throw new AssertionError("no sample value for " + k.name + "'s type: teach sample() about it");
    }

    private static Map<String, Object> allSamples() {
        Map<String, Object> layer = new LinkedHashMap<>();
        ModelKeys.all().forEach(k -> layer.put(k.name, sample(k)));
        return layer;
    }

    @Test
    public void everyKeyRoundTripsThroughApplyCopyAndDescribe() {
        Map<String, Object> layer = allSamples();
        ModelSettings s = ModelSettingsLlmKeysTest.apply(layer);
        ModelSettings c = s.copy();
        Map<String, Object> shown = new LinkedHashMap<>(ModelKeys.describe(c, Shown.TORCHSERVE));
        shown.putAll(ModelKeys.describe(c, Shown.TSERVE));
        for (ModelKey<?> k : ModelKeys.all()) {
            assertEquals(k.name + " applied", layer.get(k.name), k.get(s));
            assertEquals(k.name + " copied", layer.get(k.name), k.get(c));
            if (k.shown != Shown.HIDDEN) {
                assertEquals(k.name + " described as " + k.shownAs, layer.get(k.name), shown.get(k.shownAs));
            }
        }
    }

    @Test
    public void eachKeySetsItsOwnFieldOnly() {
        for (ModelKey<?> k : ModelKeys.all()) {
            ModelSettings s = ModelSettingsLlmKeysTest.apply(Map.of(k.name, sample(k)));
            for (ModelKey<?> other : ModelKeys.all()) {
                boolean workerBound = Set.of("minWorkers", "maxWorkers").containsAll(List.of(k.name, other.name));
                if (other != k && !workerBound) {
                    assertEquals("setting " + k.name + " changed " + other.name, other.defaultValue, other.get(s));
                }
            }
        }
    }

    @Test
    public void newSettingsHoldTheDeclaredDefaultsAndCopiesShareNothingMutable() {
        ModelSettings s = new ModelSettings();
        for (ModelKey<?> k : ModelKeys.all()) {
            assertEquals(k.name, k.defaultValue, k.get(s));
        }
        ModelSettings c = s.copy();
        c.deviceIds.add(3);
        c.torchrun.put("nnodes", 2);
        assertTrue(s.deviceIds.isEmpty());
        assertTrue(s.torchrun.isEmpty());
    }

    @Test
    public void describeNamesAreUniqueAndEveryKeyIsDocumented() {
        Set<String> names = new HashSet<>();
        for (ModelKey<?> k : ModelKeys.all()) {
            assertTrue("describe shows two keys as " + k.shownAs, names.add(k.shownAs));
            assertFalse(k.name + " has no doc line", k.doc.isBlank());
            assertFalse(k.name + " is also listed as not a setting", ModelKeys.notSettings().containsKey(k.name));
        }
    }

    @Test
    public void unknownKeysWarnButHandlerSectionsDoNot() {
        ModelSettings s = new ModelSettings();
        List<String> warnings = new ArrayList<>();
        s.apply(Map.of("handler", Map.of("a", 1), "marName", "m.mar", "batchSise", 4), "model-config.yaml of m",
                warnings);
        assertEquals(List.of("model-config.yaml of m: unknown key 'batchSise' ignored"), warnings);
        assertEquals(ModelSettings.knownKeys().size(), ModelKeys.all().size());
    }

    @Test
    public void errorsNameTheKeyAndTheLayer() {
        String[][] cases = {
            {"batchSize", "0", "register parameters: 'batchSize' must be at least 1, got 0"},
            {"batchSize", "-1", "register parameters: 'batchSize' must not be negative, got -1"},
            {"deviceType", "tpu", "register parameters: 'deviceType' must be cpu or gpu, got tpu"},
            {"parallelType", "xx", "register parameters: 'parallelType' must be one of pp, tp, pptp, custom, got xx"},
        };
        for (String[] c : cases) {
            Object v = c[1].matches("-?\\d+") ? (Object) Integer.valueOf(c[1]) : c[1];
            try {
                new ModelSettings().apply(Map.of(c[0], v), "register parameters", new ArrayList<>());
                throw new AssertionError(c[0] + "=" + c[1] + " was accepted");
            } catch (ConfigException e) {
                assertEquals(c[2], e.getMessage());
            }
        }
        ModelSettings s = ModelSettingsLlmKeysTest.apply(Map.of("jobQueueSize", 0, "deviceType", "GPU"));
        assertEquals("0 keeps the lower layer's queue size", 100, s.jobQueueSize);
        assertEquals("gpu", s.deviceType);
        assertNotEquals(s.deviceType, new ModelSettings().deviceType);
    }
}
