// GET the URL in args[0] with java.net.http.HttpClient, no proxy; print the body.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class Get {
    public static void main(String[] args) {
        try {
            HttpClient client = HttpClient.newBuilder()
                    .proxy(HttpClient.Builder.NO_PROXY)
                    .version(HttpClient.Version.HTTP_1_1)
                    .connectTimeout(Duration.ofSeconds(20))
                    .build();
            HttpRequest request = HttpRequest.newBuilder(URI.create(args[0]))
                    .timeout(Duration.ofSeconds(20))
                    .build();
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                System.err.println("java: status " + response.statusCode());
                System.exit(3);
            }
            System.out.print(response.body());
        } catch (Exception e) {
            System.err.println("java: " + e);
            System.exit(3);
        }
    }
}
