package org.tserve.workflow;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tserve.wlm.api.WlmException;
import org.yaml.snakeyaml.Yaml;

/** What a workflow spec may say, and the 400 each mistake gets. */
public class WorkflowSpecTest {
    private static final String HANDLER = "import json\n\ndef pre(data, context):\n    return data\n\n"
            + "async def post(data, context):\n    return data\n\nalias = pre\n";

    private static WorkflowSpec parse(String yaml) throws WlmException {
        Map<String, Object> map = new Yaml().load(yaml);
        return WorkflowSpec.parse(map, HANDLER, "handler.py");
    }

    private static String refusal(String yaml) {
        try {
            parse(yaml);
        } catch (WlmException e) {
            assertEquals(400, e.getStatus());
            return e.getMessage();
        }
        fail("expected a 400 for " + yaml);
        return null;
    }

    @Test
    public void globalSettingsApplyAndModelSettingsOverrideThem() throws Exception {
        WorkflowSpec s = parse("models:\n  batch-size: 3\n  timeout-ms: 500\n  m1:\n    url: m1.mar\n    batch-size: 8\n"
                + "  m2:\n    url: m2.mar\ndag:\n  pre: [m1, m2]\n  m1: [post]\n  m2: [post]\n");
        assertEquals(8, s.nodes().get("m1").batchSize());
        assertEquals(3, s.nodes().get("m2").batchSize());
        assertEquals(500, s.nodes().get("m2").timeoutMs());
        assertTrue(s.nodes().get("pre").isFunction());
        assertEquals(1, s.nodes().get("post").batchSize());
        assertEquals(List.of("pre"), s.parents("m1"));
        assertEquals(List.of("m1", "m2"), s.parents("post"));
        assertEquals(List.of(), s.children("post"));
        assertEquals(50, s.global("max-batch-delay"));
    }

    @Test
    public void aCycleIsNamed() {
        String msg = refusal("dag:\n  pre: [post]\n  post: [alias]\n  alias: [post]\n");
        assertTrue(msg, msg.contains("dag has a cycle: post -> alias -> post") || msg.contains("alias -> post -> alias"));
        assertTrue(refusal("dag:\n  pre: [pre]\n").contains("dag has a cycle: pre -> pre"));
    }

    @Test
    public void aNodeThatIsNeitherModelNorFunctionIsNamed() {
        String msg = refusal("dag:\n  pre: [nothere]\n");
        assertTrue(msg, msg.contains("[nothere]") && msg.contains("handler.py"));
    }

    @Test
    public void badSettingsAndEntriesAreRefused() {
        assertTrue(refusal("models:\n  batch-size: 0\ndag:\n  pre: []\n").contains("models: batch-size must be an integer of at least 1"));
        assertTrue(refusal("models:\n  m1:\n    batch: 2\n    url: a.mar\ndag:\n  m1: []\n").contains("unknown key 'batch'"));
        assertTrue(refusal("models:\n  m1: {}\ndag:\n  m1: []\n").contains("m1 needs a url"));
        assertTrue(refusal("models:\n  typo: 3\ndag:\n  pre: []\n").contains("'typo' is neither a setting"));
        assertTrue(refusal("models:\n  m1:\n    url: a.mar\n    min-workers: 2\n    max-workers: 1\ndag:\n  m1: []\n")
                .contains("max-workers 1 is below min-workers 2"));
        assertTrue(refusal("models: {}\n").contains("needs a 'dag:' mapping"));
        assertTrue(refusal("dag:\n  pre: post\n").contains("must map to a list"));
    }

    @Test
    public void functionsAreFoundAtModuleLevelOnly() {
        assertTrue(WorkflowSpec.defines(HANDLER, "pre"));
        assertTrue(WorkflowSpec.defines(HANDLER, "post"));
        assertTrue(WorkflowSpec.defines(HANDLER, "alias"));
        assertFalse(WorkflowSpec.defines(HANDLER, "json"));
        assertFalse(WorkflowSpec.defines("class A:\n    def inner(self):\n        pass\n", "inner"));
    }
}
