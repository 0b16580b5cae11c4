// Parameter counts, pipeline layer split and per-rank parameters, against the hand
// derivations of docs/cost-model-sources.md sections 1.1, 1.2, 1.6 and 2.1.
#include "stepcast/models/params.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "stepcast/models/presets.h"

namespace stepcast {
namespace {

const ModelSpec& preset_model(const char* name) { return builtin_presets().models.at(name); }

TEST(Params, Llama3_70bBreakdownMatchesSection1_6) {
  const ParamCounts c = count_params(preset_model("llama3-70b"));
  // L=80, h=8192, a=64, g=8, d_h=128, F=28672, V=128256, RMSNorm, untied, no biases.
  // Q + K,V + O: 8192*8192 + 2*8192*1024 + 8192*8192 = 67,108,864 + 16,777,216 + 67,108,864
  EXPECT_EQ(c.attention_per_layer, 150'994'944);
  // 3 matrices (gate, up, down): 3*8192*28672
  EXPECT_EQ(c.dense_ffn_per_layer, 704'643'072);
  // two RMSNorm gains of h each: 2*8192
  EXPECT_EQ(c.norms_per_layer, 16'384);
  // V*h = 128256*8192 each; untied, so the output projection is a second copy.
  EXPECT_EQ(c.embedding_input, 1'050'673'152);
  EXPECT_EQ(c.output_projection, 1'050'673'152);
  // RoPE has no parameters; one final RMSNorm of h.
  EXPECT_EQ(c.position_embedding, 0);
  EXPECT_EQ(c.final_norm, 8'192);
  // 80 * 855,654,400 = 68,452,352,000; + 2,101,346,304 embeddings + 8,192 final norm.
  EXPECT_EQ(c.total, 70'553'706'496);
  // Dense model: every weight is used by every token.
  EXPECT_EQ(c.active, c.total);
  EXPECT_EQ(c.dense_layers, 80);
  EXPECT_EQ(c.moe_layers, 0);
}

TEST(Params, Gpt3LayerIs12hSquaredPlus13hWithTiedEmbeddingAndLearnedPositions) {
  const ModelSpec& m = preset_model("gpt3-175b");
  ASSERT_EQ(m.hidden_size, 12288);
  ASSERT_TRUE(m.tied_embeddings);
  const std::int64_t h = 12288;
  const ParamCounts c = count_params(m);
  // Attention with biases: 4h^2 weights (a*d_h = h, g = a) + 4h biases (Q, K, V, O).
  EXPECT_EQ(c.attention_per_layer, 4 * h * h + 4 * h);
  // FFN with biases, F = 4h, G = 2: 8h^2 weights + F + h = 5h biases.
  EXPECT_EQ(c.dense_ffn_per_layer, 8 * h * h + 5 * h);
  // Two LayerNorms with gain and bias: 4h.
  EXPECT_EQ(c.norms_per_layer, 4 * h);
  // 12h^2 + 13h = 1,812,099,072 per layer (presets.json params_per_layer).
  EXPECT_EQ(c.attention_per_layer + c.dense_ffn_per_layer + c.norms_per_layer, 1'812'099'072);
  // Tied: the output projection reuses the 50257*h input embedding.
  EXPECT_EQ(c.embedding_input, 50257 * h);
  EXPECT_EQ(c.output_projection, 0);
  // Learned positions: max_seq_len * h = 2048 * 12288.
  EXPECT_EQ(c.position_embedding, 2048 * h);
  // Final LayerNorm: 2h.
  EXPECT_EQ(c.final_norm, 2 * h);
  // 96*(12h^2+13h) + 50257h + 2048h + 2h
  //   = 173,961,510,912 + 617,558,016 + 25,165,824 + 24,576 = 174,604,259,328
  EXPECT_EQ(c.total, 174'604'259'328);
}

TEST(Params, MixtralHas46_70bTotalAnd12_88bActive) {
  const ParamCounts c = count_params(preset_model("mixtral-8x7b"));
  // h=4096, a=32, g=8, d_h=128: 2*4096*4096 + 2*4096*1024 = 41,943,040.
  EXPECT_EQ(c.attention_per_layer, 41'943'040);
  // E=8 experts of G*h*F_e = 3*4096*14336 = 176,160,768 each.
  EXPECT_EQ(c.expert_per_layer, 8 * 176'160'768LL);
  EXPECT_EQ(c.shared_per_layer, 0);
  // Router h*E, no bias.
  EXPECT_EQ(c.router_per_layer, 4096 * 8);
  EXPECT_EQ(c.dense_layers, 0);
  EXPECT_EQ(c.moe_layers, 32);
  // total = 32*(41,943,040 + 8,192 + 8*176,160,768 + 32,768) + 2*32000*4096 + 4096
  //       = 32*1,451,270,144 + 262,144,000 + 4,096 = 46,702,792,704
  EXPECT_EQ(c.total, 46'702'792'704);
  // active = total with k=2 of the 8 experts: 46,702,792,704 - 32*6*176,160,768
  //        = 12,879,925,248
  EXPECT_EQ(c.active, 12'879'925'248);
}

TEST(Params, DeepSeekV3Has671_03bWithMlaAndRouterBias) {
  const ParamCounts c = count_params(preset_model("deepseek-v3"));
  // MLA (section 1.1), h=7168, a=128, r_q=1536, r_kv=512, d_n=128, d_r=64, d_v=128:
  //   h*r_q + r_q + r_q*a*(d_n+d_r)      = 11,010,048 + 1,536 + 37,748,736
  //   h*(r_kv+d_r) + r_kv + r_kv*a*(d_n+d_v) = 4,128,768 + 512 + 16,777,216
  //   a*d_v*h                            = 117,440,512
  //   sum                                = 187,107,328
  EXPECT_EQ(c.attention_per_layer, 187'107'328);
  // 256 routed experts of 3*7168*2048 = 44,040,192 each; one shared expert of the same size.
  EXPECT_EQ(c.expert_per_layer, 256 * 44'040'192LL);
  EXPECT_EQ(c.shared_per_layer, 44'040'192);
  // Router h*E plus the E-entry aux-free balancing bias: 7168*256 + 256.
  EXPECT_EQ(c.router_per_layer, 1'835'264);
  EXPECT_EQ(c.dense_layers, 3);
  EXPECT_EQ(c.moe_layers, 58);
  // dense layer = 187,107,328 + 14,336 (norms) + 3*7168*18432 (396,361,728) = 583,483,392
  // MoE layer   = 187,107,328 + 14,336 + 11,274,289,152 + 44,040,192 + 1,835,264
  //             = 11,507,286,272
  // total = 3*583,483,392 + 58*11,507,286,272 + 2*129280*7168 + 7168 = 671,026,419,200
  EXPECT_EQ(c.total, 671'026'419'200);
  // active: 8 of 256 routed experts: total - 58*248*44,040,192 = 37,552,297,472
  EXPECT_EQ(c.active, 37'552'297'472);
}

TEST(Params, Llama3_405bOnPp16SplitsAs7Then14Times8Then7) {
  // 126 = 16*7 + 14: the 14 extra layers go to the middle chunks 1..14.
  EXPECT_EQ(chunk_layers(126, 16, 0), 7);
  for (int c = 1; c <= 14; ++c) EXPECT_EQ(chunk_layers(126, 16, c), 8) << "chunk " << c;
  EXPECT_EQ(chunk_layers(126, 16, 15), 7);
  // Chunk c starts after the layers of chunks 0..c-1: 0, 7, 15, ..., 7 + 14*8 = 119.
  EXPECT_EQ(chunk_first_layer(126, 16, 0), 0);
  EXPECT_EQ(chunk_first_layer(126, 16, 1), 7);
  EXPECT_EQ(chunk_first_layer(126, 16, 15), 119);
}

TEST(Params, ChunkLayersSumToLayerCountAndDifferByAtMostOne) {
  // For every split the chunks partition the layers (sum = L, first layers contiguous),
  // are balanced (max - min <= 1, i.e. each is floor(L/c) or ceil(L/c)) and the first
  // and last chunks, which also hold embedding / output layer, never get more than a
  // middle chunk.
  for (int layers = 1; layers <= 130; ++layers) {
    for (int chunks = 1; chunks <= std::min(layers, 64); ++chunks) {
      int sum = 0, lo = layers, hi = 0, middle_min = layers;
      for (int c = 0; c < chunks; ++c) {
        const int n = chunk_layers(layers, chunks, c);
        ASSERT_EQ(chunk_first_layer(layers, chunks, c), sum) << layers << "/" << chunks;
        sum += n;
        lo = std::min(lo, n);
        hi = std::max(hi, n);
        if (c > 0 && c < chunks - 1) middle_min = std::min(middle_min, n);
      }
      ASSERT_EQ(sum, layers) << layers << " layers in " << chunks << " chunks";
      ASSERT_EQ(lo, layers / chunks) << layers << "/" << chunks;
      ASSERT_LE(hi - lo, 1) << layers << "/" << chunks;
      if (chunks > 2) {
        ASSERT_LE(chunk_layers(layers, chunks, 0), middle_min) << layers << "/" << chunks;
        ASSERT_LE(chunk_layers(layers, chunks, chunks - 1), middle_min) << layers << "/" << chunks;
      }
    }
  }
}

TEST(Params, Llama3_70bTp8Pp4RanksHoldTheirLayersPlusEmbeddingOrOutput) {
  const ModelSpec& m = preset_model("llama3-70b");
  Plan p;
  p.tp = 8;
  p.pp = 4;
  // Per layer on one TP rank: the matrices are split by t = 8, the two RMSNorm gains are
  // replicated on every TP rank (as in Megatron), so
  //   (150,994,944 + 704,643,072)/8 + 16,384 = 18,874,368 + 88,080,384 + 16,384
  //   = 106,971,136   (not 855,654,400/8 = 106,956,800: the norms are not divided).
  const double layer = 106'971'136.0;
  // Input embedding / output projection shard: 128256*8192/8 = 131,334,144.
  const double vocab_shard = 131'334'144.0;

  const RankParams first = rank_params(m, p, 0);
  EXPECT_EQ(first.layers, 20);  // 80/4, no remainder
  EXPECT_EQ(first.moe_layers, 0);
  // 20*106,971,136 + 131,334,144 = 2,270,756,864
  EXPECT_DOUBLE_EQ(first.dense, 20 * layer + vocab_shard);
  EXPECT_DOUBLE_EQ(first.dense, 2'270'756'864.0);
  EXPECT_DOUBLE_EQ(first.expert, 0.0);
  EXPECT_DOUBLE_EQ(first.largest_layer, layer);

  // Middle stages hold only layers: 20*106,971,136 = 2,139,422,720.
  EXPECT_DOUBLE_EQ(rank_params(m, p, 1).dense, 2'139'422'720.0);
  EXPECT_DOUBLE_EQ(rank_params(m, p, 2).dense, 2'139'422'720.0);

  // Last stage: layers + output projection shard + final norm (8192, replicated):
  // 2,139,422,720 + 131,334,144 + 8,192 = 2,270,765,056.
  EXPECT_DOUBLE_EQ(rank_params(m, p, 3).dense, 2'270'765'056.0);
}

TEST(Params, TiedEmbeddingIsCopiedToTheLastStageAndPositionsAreNotSplitByTp) {
  const ModelSpec& m = preset_model("gpt3-175b");
  Plan p;
  p.tp = 8;
  p.pp = 8;
  const double h = 12288;
  // 96/8 = 12 layers per stage. Per layer per TP rank: attention and FFN weights and their
  // column-parallel biases (Q, K, V: 3h; FC1: 4h) divided by t; the two row-parallel output
  // biases (the projection's and FC2's, h each) whole, as Megatron's RowParallelLinear holds
  // them; the two LayerNorms (4h) whole:
  //   (4h^2 + 3h)/8 + h + 4h + (8h^2 + 4h)/8 + h
  // (splitting the row biases too would give 2h*(1 - 1/t) = 21,504 parameters less.)
  const double layer = (4 * h * h + 3 * h) / 8 + h + 4 * h + (8 * h * h + 4 * h) / 8 + h;
  // Stage 0: word embedding / 8 plus the whole learned position table 2048*h.
  EXPECT_DOUBLE_EQ(rank_params(m, p, 0).dense, 12 * layer + 50257 * h / 8 + 2048 * h);
  // Last stage: the tied word embedding is copied there for the logits (V*h/8), and the
  // final LayerNorm (2h).
  EXPECT_DOUBLE_EQ(rank_params(m, p, 7).dense, 12 * layer + 50257 * h / 8 + 2 * h);
}

TEST(Params, Tp16OnEightKvHeadsKeepsOneReplicatedKvHeadPerRank) {
  const ModelSpec& m = preset_model("llama3-70b");
  ASSERT_EQ(m.num_kv_heads, 8);
  Plan p;
  p.tp = 16;
  p.replicate_kv_heads = true;
  // Per rank per layer: a/t = 4 query heads -> Q and O = 2 * 8192 * 4*128 = 8,388,608;
  // one whole KV head (8 heads on 16 ranks, each copied twice) -> K and V
  // = 2 * 8192 * 128 = 2,097,152; attention 10,485,760 (not 150,994,944/16 = 9,437,184).
  // FFN 704,643,072/16 = 44,040,192; norms 16,384. Layer = 54,542,336.
  const double layer = 54'542'336.0;
  const RankParams r = rank_params(m, p, 0);
  EXPECT_DOUBLE_EQ(r.largest_layer, layer);
  // pp = 1: all 80 layers, both vocab matrices / 16 (65,667,072 each), final norm 8,192.
  // 80*54,542,336 + 2*65,667,072 + 8,192 = 4,494,729,216
  EXPECT_DOUBLE_EQ(r.dense, 4'494'729'216.0);
}

TEST(Params, RoutedExpertsAreSplitByEpAndTpSharedPartsByTpOnly) {
  const ModelSpec& m = preset_model("mixtral-8x7b");
  Plan p;
  p.tp = 2;
  p.ep = 4;
  p.pp = 2;
  const RankParams r = rank_params(m, p, 1);
  EXPECT_EQ(r.layers, 16);
  EXPECT_EQ(r.moe_layers, 16);
  // Experts: 16 layers * 8 experts * 176,160,768 / (t*e = 8) = 2,818,572,288.
  EXPECT_DOUBLE_EQ(r.expert, 2'818'572'288.0);
  // Dense part per layer: attention 41,943,040/2 + norms 8,192 + the router's 4096 x 8 =
  // 32,768 whole (Megatron-Core's Router keeps its (E, h) weight on every TP rank, router.py)
  //   = 20,971,520 + 8,192 + 32,768 = 21,012,480; 16 layers = 336,199,680;
  // last stage: + output projection 32000*4096/2 = 65,536,000 + final norm 4,096.
  EXPECT_DOUBLE_EQ(r.dense, 336'199'680.0 + 65'536'000.0 + 4'096.0);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

TEST(Params, RowParallelOutputBiasesStayWholeOnEveryTpRank) {
  // A small biased model, by hand: h 64, 4 query heads and 2 KV heads of d_h 16, gated FFN
  // (G 3) of 128, 8 routed experts of 32 (4 per EP rank), one shared expert of 32.
  ModelSpec m;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.ffn_hidden_size = 128;
  m.ffn_matrices = 3;
  m.vocab_size = 256;
  m.norm = NormKind::kRmsNorm;
  m.linear_bias = true;
  Plan p;
  p.tp = 4;  // t > g: each rank holds one whole KV head (K, V and their biases)
  // Attention: Q 64x64 + bias 64 and O 64x64 split by 4 -> (4096 + 64 + 4096)/4 = 2,064;
  // K, V of one head: 2 x (64 x 16 + 16) = 2,080; O's bias whole: 64. 4,208.
  // Dense FFN: 3 x 64 x 128 / 4 = 6,144, FC1's biases 2 x 128 / 4 = 64, FC2's bias 64 whole.
  // Norms 2 x 64 = 128. Layer: 4,208 + 6,272 + 128 = 10,608.
  EXPECT_DOUBLE_EQ(layer_rank_params(m, p, false).dense, 10'608.0);
  p.tp = 1;  // nothing split: the model's own count per layer
  const ParamCounts c = count_params(m);
  EXPECT_DOUBLE_EQ(layer_rank_params(m, p, false).dense,
                   static_cast<double>(c.attention_per_layer + c.norms_per_layer + c.dense_ffn_per_layer));

  MoeSpec e;
  e.num_experts = 8;
  e.top_k = 2;
  e.num_shared_experts = 1;
  e.expert_ffn_hidden_size = 32;
  e.shared_expert_ffn_hidden_size = 32;
  m.moe = e;
  p.tp = 2;
  p.ep = 2;
  p.dp = 2;
  // Attention at t = 2 (one KV head per rank, no copy): Q, K, V, O (4,096 + 2 x 2,048 + 4,096)
  // and the Q, K, V biases (64 + 32 + 32) split: (12,288 + 128)/2 = 6,208; O's bias 64 whole.
  // Shared expert: 3 x 64 x 32 / 2 = 3,072, its FC1 biases 64 / 2 = 32, its FC2 bias 64 whole.
  // Router 64 x 8 = 512 whole; norms 128. Dense part: 6,272 + 3,168 + 512 + 128 = 10,080.
  EXPECT_DOUBLE_EQ(layer_rank_params(m, p, true).dense, 10'080.0);
  // Experts (etp = tp = 2): 4 local experts, each 6,144 / 2 = 3,072 + FC1 biases 32 + FC2's
  // 64 whole: 4 x 3,168 = 12,672.
  EXPECT_DOUBLE_EQ(layer_rank_params(m, p, true).expert, 12'672.0);
  p.etp = 1;  // folded: experts whole, 4 x (6,144 + 64 + 64) = 25,088
  EXPECT_DOUBLE_EQ(layer_rank_params(m, p, true).expert, 25'088.0);
}

TEST(Params, FoldedExpertsAreSplitByEpOnlyAndShardedOverEdp) {
  // Mixtral 8x7B, tp 2, ep 8, etp 1 on one 16-GPU stage (dp 8): experts are not split by
  // TP, edp = tp dp / (etp ep) = 16 / 8 = 2.
  const ModelSpec& m = builtin_presets().models.at("mixtral-8x7b");
  Plan p;
  p.tp = 2;
  p.dp = 8;
  p.ep = 8;
  p.etp = 1;
  EXPECT_EQ(p.edp(), 2);
  const RankParams r = rank_params(m, p, 0);
  // 32 layers x 8 experts x 176,160,768 / (etp x ep = 8) = 5,637,144,576.
  EXPECT_DOUBLE_EQ(r.expert, 5'637'144'576.0);
  p.etp = 0;  // etp = tp = 2: the same experts split 16 ways; edp = 8 x 2 / (2 x 8) = 1
  EXPECT_EQ(p.edp(), 1);
  EXPECT_DOUBLE_EQ(rank_params(m, p, 0).expert, 5'637'144'576.0 / 2);
}

}  // namespace
}  // namespace stepcast

namespace stepcast {
namespace {

// DeepSeek-V3's multi-token prediction module (mtp_modules 1), by hand from its config
// (h 7168, MLA q_lora 1536, kv_lora 512, 128 heads, nope 128, rope 64, v 128; 256 experts of
// 2048 plus one shared, router with bias): the 2h x h projection 102,760,448 and three norms
// 21,504; one MoE layer: MLA 187,107,328 (q: 7168 x 1536 + 1536 + 1536 x 128 x 192; kv:
// 7168 x 576 + 512 + 512 x 128 x 256; out: 128 x 128 x 7168), norms 14,336, experts
// 11,274,289,152, shared 44,040,192, router 1,835,264. Total 11,610,068,224, against
// README_WEIGHTS.md's "11.5B unique parameters" of the MTP module. Not in the model total.
TEST(Params, DeepSeekV3MtpModuleByHand) {
  const ModelSpec& m = preset_model("deepseek-v3");
  ASSERT_EQ(m.mtp_layers, 1);
  const ParamCounts c = count_params(m);
  EXPECT_EQ(c.mtp_extra_per_module, 102'760'448 + 21'504);
  EXPECT_EQ(c.mtp_total, 11'610'068'224);
  EXPECT_NEAR(static_cast<double>(c.mtp_total) / 11.5e9, 1.0, 0.01);
  EXPECT_EQ(c.total, 671'026'419'200);  // unchanged: the module is not part of the 671B
  // On the last pipeline stage only: tp 2, ep 64, etp 1 -> projection / 2, the layer's
  // experts / 64.
  Plan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 64;
  p.ep = 64;
  p.etp = 1;
  const LayerRankParams ml = layer_rank_params(m, p, true);
  Plan no = p;
  ModelSpec without = m;
  without.mtp_layers = 0;
  const RankParams last = rank_params(m, p, 1), base = rank_params(without, no, 1);
  EXPECT_NEAR(last.dense - base.dense, 102'760'448.0 / 2 + 21'504 + ml.dense, 1.0);
  EXPECT_NEAR(last.expert - base.expert, 11'274'289'152.0 / 64, 1.0);
  EXPECT_EQ(rank_params(m, p, 0).dense, rank_params(without, no, 0).dense);
}

}  // namespace
}  // namespace stepcast
