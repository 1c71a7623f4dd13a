package org.tserve.grpc;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.ByteString;
import com.google.protobuf.Empty;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.MetadataUtils;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Iterator;
import java.util.concurrent.TimeUnit;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.pytorch.serve.grpc.inference.InferenceAPIsServiceGrpc;
import org.pytorch.serve.grpc.inference.PredictionResponse;
import org.pytorch.serve.grpc.inference.PredictionsRequest;
import org.pytorch.serve.grpc.management.DescribeModelRequest;
import org.pytorch.serve.grpc.management.ListModelsRequest;
import org.pytorch.serve.grpc.management.ManagementAPIsServiceGrpc;
import org.pytorch.serve.grpc.management.RegisterModelRequest;
import org.pytorch.serve.grpc.management.ScaleWorkerRequest;
import org.pytorch.serve.grpc.management.SetDefaultRequest;
import org.pytorch.serve.grpc.management.UnregisterModelRequest;
import org.pytorch.serve.grpc.openinference.GRPCInferenceServiceGrpc;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ServerLiveRequest;
import org.pytorch.serve.grpc.openinference.OpenInferenceGrpc.ServerLiveResponse;
import org.tserve.auth.TokenAuthorization;
import org.tserve.config.Arguments;
import org.tserve.config.Compatibility;
import org.tserve.config.ConfigManager;
import org.tserve.wlm.ModelManager;
import org.tserve.wlm.supervision.WorkerEnvironment;

/** Both gRPC servers on free ports over a model manager without models (no Python workers needed). */
public class GrpcServersTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private GrpcServers servers;
    private ModelManager models;
    private ManagedChannel inferenceChannel;
    private ManagedChannel managementChannel;

    private void start(boolean tokenAuth, boolean modelApi) throws IOException {
        start(tokenAuth, modelApi, false);
    }

    /** {@code loadingStartupModels}: the model manager says so from before the servers start, as ModelServer's does. */
    private void start(boolean tokenAuth, boolean modelApi, boolean loadingStartupModels) throws IOException {
        start(tokenAuth, modelApi, loadingStartupModels, "");
    }

    private void start(boolean tokenAuth, boolean modelApi, boolean loadingStartupModels, String moreConfig)
            throws IOException {
        File store = tmp.newFolder();
        File props = tmp.newFile();
        Files.write(props.toPath(), ("grpc_inference_port=0\ngrpc_management_port=0\nmodel_store=" + store
            + "\nenable_model_api=" + modelApi + "\ndisable_token_authorization=" + !tokenAuth + "\n" + moreConfig)
            .getBytes(StandardCharsets.UTF_8));
        Arguments args = new Arguments();
        args.configFile = props.getPath();
        ConfigManager cfg = new ConfigManager(args, new HashMap<>());
        models = new ModelManager(cfg, new WorkerEnvironment("python3", tmp.newFolder().toPath(),
            tmp.getRoot().getPath(), null, true, false, "", true, ""), tmp.newFolder().toPath());
        models.setLoadingStartupModels(loadingStartupModels);
        TokenAuthorization auth = new TokenAuthorization(tokenAuth, tmp.getRoot().toPath().resolve("key_file.json"), 60);
        auth.init();
        servers = GrpcServers.start(cfg, models, auth, new org.tserve.server.ResponseListeners());
        inferenceChannel = NettyChannelBuilder.forAddress("127.0.0.1", servers.inferencePort()).usePlaintext().build();
        managementChannel = NettyChannelBuilder.forAddress("127.0.0.1", servers.managementPort()).usePlaintext().build();
    }

    @After
    public void stop() throws InterruptedException {
        Compatibility.install(Compatibility.TSERVE);
        if (inferenceChannel != null) {
            inferenceChannel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            managementChannel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        if (servers != null) {
            servers.stop();
        }
        if (models != null) {
            models.shutdown();
        }
    }

    private InferenceAPIsServiceGrpc.InferenceAPIsServiceBlockingStub inference() {
        return InferenceAPIsServiceGrpc.newBlockingStub(inferenceChannel).withDeadlineAfter(20, TimeUnit.SECONDS);
    }

    private ManagementAPIsServiceGrpc.ManagementAPIsServiceBlockingStub management() {
        return ManagementAPIsServiceGrpc.newBlockingStub(managementChannel).withDeadlineAfter(20, TimeUnit.SECONDS);
    }

    private static void assertCode(Status.Code code, String fragment, Runnable r) {
        try {
            r.run();
            fail("expected " + code);
        } catch (StatusRuntimeException e) {
            assertEquals(e.getStatus().toString(), code, e.getStatus().getCode());
            String d = String.valueOf(e.getStatus().getDescription());
            assertTrue(d, d.contains(fragment));
        }
    }

    private static PredictionsRequest request(String model) {
        return PredictionsRequest.newBuilder().setModelName(model).putInput("data", ByteString.copyFromUtf8("x")).build();
    }

    @Test
    public void aKeepaliveTimeBelowGrpcsMinimumIsRaisedToIt() {
        assertEquals(GrpcServers.MIN_KEEPALIVE_MS, GrpcServers.keepAliveMs(300));
        assertEquals(GrpcServers.MIN_KEEPALIVE_MS, GrpcServers.keepAliveMs(9_999));
        assertEquals(10_000, GrpcServers.keepAliveMs(10_000));
        assertEquals(7_200_000, GrpcServers.keepAliveMs(7_200_000));
        assertEquals(0, GrpcServers.keepAliveMs(0)); // never: left to positiveOr
    }

    @Test
    public void pingIsHealthyJson() throws IOException {
        start(false, false);
        JsonObject o = JsonParser.parseString(inference().ping(Empty.getDefaultInstance()).getHealth()).getAsJsonObject();
        assertEquals("Healthy", o.get("status").getAsString());
    }

    @Test
    public void unknownModelIsNotFound() throws IOException {
        start(false, false);
        assertCode(Status.Code.NOT_FOUND, "Model not found: nope", () -> inference().predictions(request("nope")));
        assertCode(Status.Code.NOT_FOUND, "Model not found: nope", () -> {
            Iterator<PredictionResponse> it = inference().streamPredictions(request("nope"));
            it.hasNext();
        });
        assertCode(Status.Code.NOT_FOUND, "Model not found: nope",
            () -> management().describeModel(DescribeModelRequest.newBuilder().setModelName("nope").build()));
        assertCode(Status.Code.NOT_FOUND, "nope",
            () -> management().scaleWorker(ScaleWorkerRequest.newBuilder().setModelName("nope").setMinWorker(1).build()));
    }

    @Test
    public void missingModelNameIsInvalidArgument() throws IOException {
        start(false, false);
        assertCode(Status.Code.INVALID_ARGUMENT, "model_name", () -> inference().predictions(PredictionsRequest.getDefaultInstance()));
        assertCode(Status.Code.INVALID_ARGUMENT, "model_name",
            () -> management().describeModel(DescribeModelRequest.getDefaultInstance()));
    }

    @Test
    public void setDefaultWithoutAVersionIsInvalidArgumentOrTorchServesNotFound() throws IOException, InterruptedException {
        start(false, false);
        assertCode(Status.Code.INVALID_ARGUMENT, "model_version",
            () -> management().setDefault(SetDefaultRequest.newBuilder().setModelName("squeezenet").build()));
        stop();
        start(false, false, false, "compatibility=torchserve-0.12\n");
        // TorchServe 0.12's test_gRPC_management_apis expects NOT_FOUND here (its data file's set-default paths
        // give the test no version)
        assertCode(Status.Code.NOT_FOUND, "squeezenet",
            () -> management().setDefault(SetDefaultRequest.newBuilder().setModelName("squeezenet").build()));
    }

    @Test
    public void modelApiSwitchIsHonoured() throws IOException {
        start(false, false);
        assertCode(Status.Code.PERMISSION_DENIED, "enable_model_api",
            () -> management().registerModel(RegisterModelRequest.newBuilder().setUrl("x.mar").build()));
        assertCode(Status.Code.PERMISSION_DENIED, "enable_model_api",
            () -> management().unregisterModel(UnregisterModelRequest.newBuilder().setModelName("x").build()));
    }

    @Test
    public void registerErrorsMapToCodes() throws IOException {
        start(false, true);
        assertCode(Status.Code.INVALID_ARGUMENT, "url",
            () -> management().registerModel(RegisterModelRequest.getDefaultInstance()));
        assertCode(Status.Code.NOT_FOUND, "missing.mar",
            () -> management().registerModel(RegisterModelRequest.newBuilder().setUrl("missing.mar").build()));
    }

    @Test
    public void listIsJson() throws IOException {
        start(false, false);
        String msg = management().listModels(ListModelsRequest.newBuilder().setLimit(10).build()).getMsg();
        assertEquals(0, JsonParser.parseString(msg).getAsJsonObject().getAsJsonArray("models").size());
    }

    @Test
    public void tokenAuthUsesTheRestKeys() throws IOException {
        start(true, false);
        assertCode(Status.Code.UNAUTHENTICATED, "Token Authorization failed", () -> inference().ping(Empty.getDefaultInstance()));
        JsonObject keys = JsonParser.parseString(new String(Files.readAllBytes(tmp.getRoot().toPath()
            .resolve("key_file.json")), StandardCharsets.UTF_8)).getAsJsonObject();
        String inferenceKey = keys.getAsJsonObject("inference").get("key").getAsString();
        String managementKey = keys.getAsJsonObject("management").get("key").getAsString();
        Metadata md = new Metadata();
        md.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + inferenceKey);
        assertTrue(inference().withInterceptors(MetadataUtils.newAttachHeadersInterceptor(md))
            .ping(Empty.getDefaultInstance()).getHealth().contains("Healthy"));
        // the inference key does not open the management API
        assertCode(Status.Code.UNAUTHENTICATED, "management", () -> management()
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(md)).listModels(ListModelsRequest.getDefaultInstance()));
        Metadata mm = new Metadata();
        mm.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + managementKey);
        management().withInterceptors(MetadataUtils.newAttachHeadersInterceptor(mm)).listModels(ListModelsRequest.getDefaultInstance());
    }

    private static ServingStatus health(ManagedChannel channel, String service) {
        return HealthGrpc.newBlockingStub(channel).withDeadlineAfter(20, TimeUnit.SECONDS)
            .check(HealthCheckRequest.newBuilder().setService(service).build()).getStatus();
    }

    private static void awaitHealth(ManagedChannel channel, String service, ServingStatus want) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (health(channel, service) != want) {
            assertTrue(service + " never became " + want, System.nanoTime() < deadline);
            Thread.sleep(GrpcHealth.PERIOD_MS / 5);
        }
    }

    @Test
    public void healthFollowsTheStartupModelsWithoutToken() throws IOException, InterruptedException {
        start(true, false, true);
        for (ManagedChannel ch : new ManagedChannel[] {inferenceChannel, managementChannel}) {
            assertEquals(ServingStatus.NOT_SERVING, health(ch, ""));   // from the first call on, no window
            assertEquals(ServingStatus.NOT_SERVING, health(ch, InferenceAPIsServiceGrpc.SERVICE_NAME));
        }
        models.setLoadingStartupModels(false);
        for (ManagedChannel ch : new ManagedChannel[] {inferenceChannel, managementChannel}) {
            awaitHealth(ch, "", ServingStatus.SERVING);
            for (String s : new String[] {InferenceAPIsServiceGrpc.SERVICE_NAME, ManagementAPIsServiceGrpc.SERVICE_NAME,
                    GRPCInferenceServiceGrpc.SERVICE_NAME, ServiceAlias.OIP_STANDARD_NAME}) {
                assertEquals(s, ServingStatus.SERVING, health(ch, s));
            }
            assertCode(Status.Code.NOT_FOUND, "", () -> health(ch, "nosuch"));
        }
    }

    @Test
    public void openInferenceAnswersUnderKServesServiceNameToo() throws IOException {
        start(false, false);
        io.grpc.MethodDescriptor<ServerLiveRequest, ServerLiveResponse> live = GRPCInferenceServiceGrpc.getServerLiveMethod()
            .toBuilder().setFullMethodName(io.grpc.MethodDescriptor.generateFullMethodName(ServiceAlias.OIP_STANDARD_NAME,
                "ServerLive")).build();
        assertTrue(io.grpc.stub.ClientCalls.blockingUnaryCall(inferenceChannel, live, io.grpc.CallOptions.DEFAULT
            .withDeadlineAfter(20, TimeUnit.SECONDS), ServerLiveRequest.getDefaultInstance()).getLive());
    }

    @Test
    public void healthTurnsNotServingAtStop() throws IOException, InterruptedException {
        start(false, false);
        Iterator<HealthCheckResponse> watch = HealthGrpc.newBlockingStub(inferenceChannel).withDeadlineAfter(20, TimeUnit.SECONDS)
            .watch(HealthCheckRequest.getDefaultInstance());
        assertEquals(ServingStatus.SERVING, watch.next().getStatus());
        GrpcServers stopping = servers;
        servers = null;
        Thread stopper = new Thread(stopping::stop, "stop");
        stopper.start();
        assertEquals(ServingStatus.NOT_SERVING, watch.next().getStatus());
        inferenceChannel.shutdownNow();   // ends the watch: the server's stop need not wait for it
        stopper.join(20_000);
        assertFalse(stopper.isAlive());
    }
}
