/* quant: tensor formats (implemented by the model-files work). */
