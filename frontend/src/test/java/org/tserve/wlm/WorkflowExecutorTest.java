package org.tserve.wlm;

import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.Test;
import org.tserve.wlm.api.Header;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.api.Response;
import org.tserve.workflow.Workflow;
import org.tserve.workflow.WorkflowExecutor;
import org.tserve.workflow.WorkflowSpec;
import org.yaml.snakeyaml.Yaml;

/**
 * The DAG runner with its node jobs answered here as workers answer them (this package may call
 * {@link Job#result}): what each node receives, what runs concurrently, retries, one answer.
 */
public class WorkflowExecutorTest {
    private static final String HANDLER = "def pre(d, c):\n    pass\ndef post(d, c):\n    pass\n";

    /** The jobs the runner submitted, in order, and the client's answers. */
    private final List<Job> jobs = new ArrayList<>();
    private final List<Response> results = new ArrayList<>();
    private final List<String> errors = new ArrayList<>();

    private void run(String yaml, byte[] body) throws Exception {
        Map<String, Object> map = new Yaml().load(yaml);
        Workflow wf = new Workflow("wf", null, WorkflowSpec.parse(map, HANDLER, "h.py"), 0);
        WorkflowExecutor.run(wf, jobs::add, "req1", List.of(new Header("x-test", "1")),
                List.of(new Part("body", "text/plain", body)), new JobResponder() {
                    @Override
                    public void onChunk(Response chunk) {
                    }

                    @Override
                    public void onResult(Response result) {
                        results.add(result);
                    }

                    @Override
                    public void onError(int status, String message) {
                        errors.add(status + " " + message);
                    }
                });
    }

    private Job job(String model) {
        return jobs.stream().filter(j -> j.getModelName().equals(model) && !j.isDone()).findFirst().orElseThrow();
    }

    private static void answer(Job j, int status, String body) {
        j.result(new Response(j.getId(), status, status < 400 ? "OK" : body, "", List.of(),
                body.getBytes(StandardCharsets.UTF_8)));
    }

    private static String text(Part p) {
        return p.name() + "=" + new String(p.value(), StandardCharsets.UTF_8);
    }

    private static final String DIAMOND = "models:\n  retry-attempts: 0\n  a:\n    url: a.mar\n  b:\n    url: b.mar\n"
            + "dag:\n  pre: [a, b]\n  a: [post]\n  b: [post]\n";

    @Test
    public void parallelBranchesThenOneInputPerParent() throws Exception {
        run(DIAMOND, "hi".getBytes(StandardCharsets.UTF_8));
        assertEquals(1, jobs.size());
        Job pre = job("wf__pre");
        assertEquals("body=hi", text(pre.getParts().get(0)));
        assertEquals("1", pre.header("x-test"));
        answer(pre, 200, "P");
        // both branches are queued before either answers
        assertEquals(3, jobs.size());
        assertEquals("body=P", text(job("wf__a").getParts().get(0)));
        assertEquals("body=P", text(job("wf__b").getParts().get(0)));
        answer(job("wf__b"), 200, "B");
        assertEquals(3, jobs.size());
        answer(job("wf__a"), 200, "A");
        Job post = job("wf__post");
        List<String> inputs = post.getParts().stream().map(WorkflowExecutorTest::text).sorted().toList();
        assertEquals(List.of("a=A", "b=B"), inputs);
        assertTrue(results.isEmpty());
        answer(post, 200, "{\"done\": 1}");
        assertEquals(1, results.size());
        assertEquals("{\"done\": 1}", new String(results.get(0).body(), StandardCharsets.UTF_8));
        assertEquals("application/json", results.get(0).contentType());
        assertTrue(errors.isEmpty());
    }

    @Test
    public void aFailingNodeAnswersOnceNamingItself() throws Exception {
        run(DIAMOND, new byte[0]);
        answer(job("wf__pre"), 200, "P");
        answer(job("wf__a"), 500, "ValueError: bad");
        answer(job("wf__b"), 200, "B");
        assertEquals(List.of("500 Workflow wf: node a failed: ValueError: bad"), errors);
        assertTrue(results.isEmpty());
        assertTrue(jobs.stream().noneMatch(j -> j.getModelName().equals("wf__post")));
    }

    @Test
    public void aServerErrorIsRetriedAClientErrorIsNot() throws Exception {
        run("models:\n  retry-attempts: 1\n  a:\n    url: a.mar\ndag:\n  a: []\n", new byte[0]);
        answer(job("wf__a"), 503, "busy");
        assertEquals(2, jobs.size());
        answer(job("wf__a"), 200, "ok");
        assertEquals("ok", new String(results.get(0).body(), StandardCharsets.UTF_8));

        results.clear();
        jobs.clear();
        run("models:\n  retry-attempts: 3\n  a:\n    url: a.mar\ndag:\n  a: []\n", new byte[0]);
        answer(job("wf__a"), 400, "bad input");
        assertEquals(1, jobs.size());
        assertEquals("400 Workflow wf: node a failed: bad input", errors.get(0));
    }

    @Test
    public void severalLeavesAnswerOneJsonObject() throws Exception {
        run("models:\n  a:\n    url: a.mar\n  b:\n    url: b.mar\ndag:\n  pre: [a, b]\n", new byte[0]);
        answer(job("wf__pre"), 200, "P");
        answer(job("wf__a"), 200, "{\"x\": 1}");
        assertTrue(results.isEmpty());
        answer(job("wf__b"), 200, "plain text");
        assertEquals("{\"a\":{\"x\":1},\"b\":\"plain text\"}", new String(results.get(0).body(), StandardCharsets.UTF_8));
        assertTrue(errors.toString(), errors.isEmpty());
    }
}
