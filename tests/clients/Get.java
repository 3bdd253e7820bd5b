// GET the URL in args[0] with java.net.http.HttpClient, no proxy; print the body. A status
// but 200 goes to stderr with the body, exit 3.
import java.io.FileInputStream;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class Get {
    // Java reads its own trust store, not the sandbox's bundle: trust the bundle
    // (SSL_CERT_FILE, which the sandbox sets) as other runtimes do, else the defaults.
    static SSLContext trusting(String bundle) throws Exception {
        if (bundle == null) {
            return SSLContext.getDefault();
        }
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        int i = 0;
        try (InputStream in = new FileInputStream(bundle)) {
            for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                store.setCertificateEntry("ca" + i++, c);
            }
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(store);
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, tmf.getTrustManagers(), null);
        return ctx;
    }

    public static void main(String[] args) {
        try {
            HttpClient client = HttpClient.newBuilder()
                    .sslContext(trusting(System.getenv("SSL_CERT_FILE")))
                    .proxy(HttpClient.Builder.NO_PROXY)
                    .version(HttpClient.Version.HTTP_1_1)
                    .connectTimeout(Duration.ofSeconds(20))
                    .build();
            HttpRequest request = HttpRequest.newBuilder(URI.create(args[0]))
                    .timeout(Duration.ofSeconds(20))
                    .build();
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                System.err.println("java: status " + response.statusCode() + "\n" + response.body());
                System.exit(3);
            }
            System.out.print(response.body());
        } catch (Exception e) {
            System.err.println("java: " + e);
            System.exit(3);
        }
    }
}
